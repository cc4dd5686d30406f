"""Short commands start fast: each command imports what it needs when it runs, nothing at parse time.

Checked by what is imported (the cause of a slow start: the services, clients and broker
took 1.5 s to import), not by timing it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What only the long-running services need.
SERVICE_IMPORTS = (
    "aiokafka",
    "aiohttp",
    "kubernetes_asyncio",
    "opentelemetry",
    "prometheus_client",
    "topoplace.dev.broker",
    "topoplace.dev.demo",
    "topoplace.dev.kubeapi",
)
# Building the parser needs none of these either.
PARSER_FREE = (*SERVICE_IMPORTS, "asyncio", "rich", "services", "schemas")


def imported_by(code: str) -> set[str]:
    script = f"import sys, json, contextlib, io\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def among(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(f"{p}.") for p in packages))


def test_building_the_parser_imports_no_command_body() -> None:
    loaded = imported_by("from topoplace.cli import build_parser\nbuild_parser().parse_args(['topics', 'list'])")
    assert among(loaded, PARSER_FREE) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["engine", "pick", "--topology", "dgx1-v100", "--count", "2"],
        ["engine", "place", "--snapshot", "examples/snapshot-nvidia-cluster.json"],
        ["topo", "show", "--topology", "pcie-4gpu"],
        ["topics", "list"],
        ["collector", "fixtures"],
    ],
    ids=lambda argv: "-".join(argv[:2]),
)
def test_a_short_command_imports_no_service_client(argv: list[str]) -> None:
    loaded = imported_by(
        f"from topoplace.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n    main({argv!r})"
    )
    assert among(loaded, SERVICE_IMPORTS) == []
