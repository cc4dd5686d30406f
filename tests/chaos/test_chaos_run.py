"""Bounded chaos runs: 500+ pods, every process fault and every API fault kind at least once, a hostile
tenant and topic producer beside them; the checker, reading only the API server, finds every pod bound or
unschedulable with a reason, no violation, and every service alive. Select them alone with `pytest -m chaos`."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoplace.dev.chaos.harness import ChaosOptions, run_chaos
from topoplace.dev.chaos.hostile import ATTACKS
from topoplace.dev.chaos.report import ChaosReport, write
from topoplace.dev.chaos.schedule import PROCESS_FAULTS
from topoplace.dev.kubeapi.faults import KINDS as API_FAULT_KINDS

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]
# Time for every pod to be accounted for once the faults and submissions end: a bound on
# liveness, not a speed goal (a passing run ends as soon as it has converged).
CONVERGE_TIMEOUT_S = 600.0


def check(report: ChaosReport, logs: Path, *, process_faults: tuple[str, ...]) -> None:
    where = f"service logs in {logs}"
    write(report, logs / "chaos-report.json")  # beside the service logs, for the numbers
    assert report.pods >= 500
    missing = [kind for kind in (*API_FAULT_KINDS, *process_faults) if report.faults.get(kind, 0) < 1]
    assert not missing, f"fault kinds never injected: {missing}"
    assert sum(report.faults[k] for k in API_FAULT_KINDS) >= 0.10 * report.api_requests_considered
    found = {kind: n for kind, n in report.violations.items() if n}
    assert not found, f"{found}: {report.violation_samples}; {where}"
    assert report.converged, (
        f"{report.unconverged} pods neither bound nor unschedulable ({', '.join(report.unconverged_samples)}); {where}"
    )
    assert report.deleted > 0
    # The hostile tenant and producer ran beside the faults, every attack at least once.
    assert not [kind for kind in ATTACKS if report.hostile.get(kind, 0) < 1], report.hostile
    # Preemption's victims are gone by design (the checker holds each to a lower priority than its preemptor's).
    assert report.bound + report.unschedulable == report.pods - report.deleted - report.preempted


async def test_one_replica_each_holds_every_invariant_through_every_fault(tmp_path: Path) -> None:
    options = ChaosOptions(
        pods=500, gangs=6, seed=11, placers=1, binders=1, work_dir=tmp_path, converge_timeout_s=CONVERGE_TIMEOUT_S
    )
    report = await run_chaos(options)
    # The schedule kills only the services that run: here no second placer or binder.
    check(report, tmp_path, process_faults=tuple(k for k in PROCESS_FAULTS if not k.endswith("-b")))


async def test_two_placers_and_two_binders_hold_every_invariant_through_every_fault(tmp_path: Path) -> None:
    # Two placers decide on their own views; the binders elect one to bind, which holds every
    # binding to the devices and the node's resources left.
    options = ChaosOptions(
        pods=500, gangs=6, seed=12, placers=2, binders=2, work_dir=tmp_path, converge_timeout_s=CONVERGE_TIMEOUT_S
    )
    report = await run_chaos(options)
    check(report, tmp_path, process_faults=PROCESS_FAULTS)
