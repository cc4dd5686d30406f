"""The chaos report: a few samples of every violation kind; ok only when converged and clean."""

from __future__ import annotations

from pathlib import Path

import msgspec

from topoplace.dev.chaos.checker import Violation
from topoplace.dev.chaos.harness import _samples
from topoplace.dev.chaos.report import ChaosReport, write


def test_a_frequent_kind_does_not_hide_a_rare_one() -> None:
    many = [Violation(kind="node_overcommitted", subject=f"n{i}", detail="") for i in range(30)]
    rare = Violation(kind="device_conflict", subject="n1/0", detail="")
    samples = _samples([*many, rare], per_kind=5)
    assert rare in samples
    assert [v.subject for v in samples if v.kind == "node_overcommitted"] == ["n0", "n1", "n2", "n3", "n4"]


def test_a_report_is_ok_only_when_converged_without_violations(tmp_path: Path) -> None:
    clean = ChaosReport(pods=1, gangs=0, seed=1, api_fault_rate=0.1, violations={"device_conflict": 0}, converged=True)
    assert clean.ok
    assert not msgspec.structs.replace(clean, converged=False).ok
    assert not msgspec.structs.replace(clean, violations={"device_conflict": 1}).ok
    write(clean, tmp_path / "chaos-report.json")
    assert msgspec.json.decode((tmp_path / "chaos-report.json").read_bytes(), type=ChaosReport) == clean
