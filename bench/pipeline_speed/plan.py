"""The load plan: the pod every step submits, the steps of each profile (rising offered load), the goals."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from topoplace.dev.demo import workload

# The workload's shared-GPU pod: a quarter of one NVIDIA GPU's cores and 4 GB of its memory.
# The demo cluster's 120 NVIDIA GPUs hold 480 of them, so a step of up to that many all fit.
POD_KIND = next(k for k in workload.MIX if k.name == "nvidia-share")
STEP_CAPACITY = 480
# The goals: sustained pods/s with one placer and one binder, and the p99 pending -> bound at 500 offered.
GOAL_PODS_PER_S = 2000.0
GOAL_OFFERED = 500.0
GOAL_P99_MS = 100.0


class LoadStep(msgspec.Struct, frozen=True, kw_only=True):
    offered_pods_per_s: float
    pods: int


PLANS: dict[str, tuple[LoadStep, ...]] = {
    "short": (
        LoadStep(offered_pods_per_s=20.0, pods=60),
        LoadStep(offered_pods_per_s=50.0, pods=100),
        LoadStep(offered_pods_per_s=100.0, pods=150),
        LoadStep(offered_pods_per_s=200.0, pods=200),
        LoadStep(offered_pods_per_s=GOAL_OFFERED, pods=STEP_CAPACITY),
    ),
    "full": (
        LoadStep(offered_pods_per_s=20.0, pods=200),
        LoadStep(offered_pods_per_s=50.0, pods=300),
        LoadStep(offered_pods_per_s=100.0, pods=400),
        LoadStep(offered_pods_per_s=200.0, pods=400),
        LoadStep(offered_pods_per_s=400.0, pods=400),
        LoadStep(offered_pods_per_s=GOAL_OFFERED, pods=STEP_CAPACITY),
    ),
}


def step_plan(profile: str) -> tuple[LoadStep, ...]:
    """The load steps of a profile, rising load; every step's pods fit the cluster at once."""
    try:
        plan = PLANS[profile]
    except KeyError:
        raise ValueError(f"profile: no pipeline plan for {profile!r} (known: {', '.join(sorted(PLANS))})") from None
    check_plan(plan)
    return plan


def check_plan(plan: Sequence[LoadStep]) -> None:
    for i, step in enumerate(plan):
        if step.offered_pods_per_s <= 0:
            raise ValueError(f"step {i}: offered_pods_per_s must be > 0, got {step.offered_pods_per_s}")
        if not 1 <= step.pods <= STEP_CAPACITY:
            raise ValueError(f"step {i}: pods must be 1..{STEP_CAPACITY} (all must fit at once), got {step.pods}")
