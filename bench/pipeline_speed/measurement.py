"""The measurement: a step's figures from wall-clock timestamps, and the CPU each process used (from /proc)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec
import numpy as np

from bench.pipeline_speed.plan import LoadStep


class PipelineFigures(msgspec.Struct, frozen=True, kw_only=True):
    placers: int  # 1 or 2 placer instances, one binder
    offered_pods_per_s: float
    sustained_pods_per_s: float  # bound pods / (last bound - first submitted)
    p50_pending_to_bound_ms: float
    p99_pending_to_bound_ms: float
    pods: int
    bound: int = 0
    unschedulable: int = 0
    unfinished: int = 0  # neither bound nor unschedulable when the step timed out
    conflicts: int = 0  # binds refused (devices taken, pod gone) that sent a pod back to the placer
    cores_by_service: dict[str, float] = {}  # CPU seconds used during the step / its wall time (1.0 = a core)
    submitted_pods_per_s: float = 0.0  # what the load generator achieved (it may fall behind the offer)
    machine: str = ""

    def busiest(self) -> tuple[str, float] | None:
        return max(self.cores_by_service.items(), key=lambda kv: kv[1]) if self.cores_by_service else None


class PipelineRun(msgspec.Struct, frozen=True, kw_only=True):
    """One pipeline (one placer count) through every load step; `error` when it could not run."""

    placers: int
    steps: tuple[PipelineFigures, ...] = ()
    error: str = ""

    def summary(self) -> str:
        if self.error:
            return f"pipeline with {self.placers} placer(s) not measured: {self.error}"
        rates = ", ".join(f"{s.offered_pods_per_s:g}/s offered -> {s.sustained_pods_per_s:.1f}/s" for s in self.steps)
        return f"pipeline with {self.placers} placer(s): {rates}"

    def headline(self) -> PipelineFigures | None:
        """The highest offered load's figures: the `pipeline.*.placers<n>` figures."""
        return max(self.steps, key=lambda s: s.offered_pods_per_s) if self.steps else None


def cpu_seconds(stat_line: str, ticks_per_s: int) -> float:
    """User + system CPU time of a process, from its /proc/<pid>/stat line."""
    # The command name may hold spaces and parentheses: fields are counted after its last ')'.
    # There field 3 (state) is index 0, so utime (14) and stime (15) are indices 11 and 12.
    fields = stat_line.rsplit(")", 1)[-1].split()
    if len(fields) < 13:
        raise ValueError(f"stat_line: too few fields after the command name ({len(fields)})")
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def read_cpu_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """Service -> CPU seconds so far; services whose /proc entry cannot be read are left out."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            out[name] = cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), ticks)
        except (OSError, ValueError):
            continue  # not Linux, or the process is gone: that service's share is not reported
    return out


def cores_used(before: Mapping[str, float], after: Mapping[str, float], wall_s: float) -> dict[str, float]:
    """CPU seconds each service used between two readings, per second of wall time."""
    if wall_s <= 0:
        return {}
    return {name: round((after[name] - before[name]) / wall_s, 3) for name in before if name in after}


def step_figures(
    *,
    placers: int,
    step: LoadStep,
    submitted_at: Mapping[str, float],
    bound_at: Mapping[str, float],
    unschedulable: int,
    conflicts: int = 0,
    cores_by_service: Mapping[str, float] | None = None,
    machine: str = "",
) -> PipelineFigures:
    """Figures of one step from wall-clock timestamps (seconds): pod -> created, pod -> bound.

    Latency percentiles are numpy's linear interpolation over the bound pods;
    sustained rate = bound pods / (last bound - first submitted).
    """
    missing = sorted(set(bound_at) - set(submitted_at))
    if missing:
        raise ValueError(f"bound_at: pods never submitted: {missing[:3]}")
    latencies_ms = np.array([1000.0 * (bound_at[p] - submitted_at[p]) for p in bound_at])
    first, last_submit = (min(submitted_at.values()), max(submitted_at.values())) if submitted_at else (0.0, 0.0)
    span = max(bound_at.values()) - first if bound_at else 0.0
    submit_span = last_submit - first
    return PipelineFigures(
        placers=placers,
        offered_pods_per_s=step.offered_pods_per_s,
        sustained_pods_per_s=len(bound_at) / span if span > 0 else 0.0,
        p50_pending_to_bound_ms=float(np.percentile(latencies_ms, 50)) if len(latencies_ms) else float("nan"),
        p99_pending_to_bound_ms=float(np.percentile(latencies_ms, 99)) if len(latencies_ms) else float("nan"),
        pods=step.pods,
        bound=len(bound_at),
        unschedulable=unschedulable,
        unfinished=step.pods - len(bound_at) - unschedulable,
        # n pods span n - 1 intervals
        submitted_pods_per_s=(len(submitted_at) - 1) / submit_span if submit_span > 0 else 0.0,
        conflicts=conflicts,
        cores_by_service=dict(cores_by_service or {}),
        machine=machine,
    )
