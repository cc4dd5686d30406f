"""The small arithmetic and layout every report section shares: means over seeds, baselines, Markdown tables."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from bench.trace_replay import ReplayResult


def mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values))


def sd(values: Sequence[float]) -> float:
    """The sample standard deviation; 0 for a single value."""
    return float(statistics.stdev(values)) if len(values) > 1 else 0.0


def trace_means(trace: Mapping[str, Sequence[ReplayResult]], attr: str) -> dict[str, float]:
    """Policy -> the mean of one ReplayResult attribute over its seeds."""
    return {p: mean([getattr(r, attr) for r in runs]) for p, runs in trace.items()}


def others(values: Mapping[str, float], me: str) -> dict[str, float]:
    """Every policy's value but `me`'s: a figure's baselines."""
    return {k: round(v, 4) for k, v in values.items() if k != me}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
