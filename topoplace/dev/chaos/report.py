"""chaos-report.json: what a chaos run did to the system and what the checker found."""

from __future__ import annotations

from pathlib import Path

import msgspec

from topoplace.dev.chaos.checker import Violation


class ChaosReport(msgspec.Struct, kw_only=True):
    pods: int  # submitted, gang members included
    gangs: int
    deleted: int = 0  # single pods the run deleted again (churn), bound or not by then
    preempted: int = 0  # pods evicted by a preemption (for the high-priority stream)
    seed: int
    api_fault_rate: float
    api_requests_considered: int = 0  # requests the API server's fault plan drew for
    faults: dict[str, int] = {}  # by kind: API faults (429, 500, ...), kill:<service>, broker-restart
    violations: dict[str, int] = {}  # by kind, every kind listed (0 when none)
    violation_samples: tuple[Violation, ...] = ()
    bound: int = 0
    unschedulable: int = 0
    unconverged: int = 0  # at the end: pods neither bound nor unschedulable with a reason
    unconverged_samples: tuple[str, ...] = ()  # namespace/name of the first few of them
    converged: bool = False
    time_to_converge_s: float | None = None  # from the last fault and the last submission to convergence
    duration_s: float = 0.0
    hostile: dict[str, int] = {}  # what the hostile tenant and producer did, by kind

    @property
    def ok(self) -> bool:
        return self.converged and not any(self.violations.values())


def write(report: ChaosReport, path: Path) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
