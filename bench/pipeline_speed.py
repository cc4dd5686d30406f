"""Pipeline speed through the broker: sustained pods/s and pending -> bound latency.

Needs the whole pipeline running (broker, test API server, collector, placer(s),
binder). `measure_pipeline` is the single entry point `bench.run` calls; until it
is filled in, it returns None and the report says the figure was not measured.
"""

from __future__ import annotations

import msgspec


class PipelineFigures(msgspec.Struct, frozen=True, kw_only=True):
    placers: int  # 1 or 2 placer instances, one binder
    offered_pods_per_s: float
    sustained_pods_per_s: float
    p50_pending_to_bound_ms: float
    p99_pending_to_bound_ms: float
    pods: int


def measure_pipeline(*, placers: int, offered_pods_per_s: float, pods: int) -> PipelineFigures | None:
    """Run `pods` pending pods through broker -> placer(s) -> binder -> API server at the offered rate.

    Not implemented yet: returns None (the report lists the figure as not measured).
    """
    return None
