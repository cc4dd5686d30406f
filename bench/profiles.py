"""The benchmark's profiles: how much of each section a run measures (`--profile short|full`)."""

from __future__ import annotations

import msgspec

from bench import scale


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    trace_seeds: tuple[int, ...]
    trace_stop_at: float  # replay until this x capacity of arrived demand (the figure is read at 1.0)
    device_per_type: int
    device_jobs: int
    device_seed: int
    speed: tuple[tuple[int, int], ...]  # (nodes, decisions)
    search_quick: bool
    earlier_variants: bool  # also replay every paper policy under our earlier protocol (labelled extras)
    scale: scale.ScaleProfile


PROFILES = {
    "short": Profile(
        name="short",
        trace_seeds=(0, 1),
        trace_stop_at=1.0,
        device_per_type=4,
        device_jobs=400,
        device_seed=1,
        speed=((10, 200), (100, 40), (1000, 6)),
        search_quick=True,
        earlier_variants=False,
        scale=scale.SHORT,
    ),
    "full": Profile(
        name="full",
        trace_seeds=tuple(range(10)),
        trace_stop_at=1.3,
        device_per_type=8,
        device_jobs=2000,
        device_seed=1,
        speed=((10, 500), (100, 100), (1000, 20), (10000, 3)),
        search_quick=False,
        earlier_variants=True,
        scale=scale.FULL,
    ),
}
