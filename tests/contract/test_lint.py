"""The code stays typed (mypy --strict) and lint-clean (ruff): both run as part of the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["schemas", "engine", "services", "topoplace"]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", *PACKAGES)
    assert result.returncode == 0, result.stdout[-4000:]


def test_mypy_strict_finds_nothing() -> None:
    result = _run("mypy", *PACKAGES)
    assert result.returncode == 0, result.stdout[-4000:]
