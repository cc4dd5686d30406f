"""The fault schedule: which process faults happen when, seeded; API faults are the API server's own."""

from __future__ import annotations

import random

import msgspec

# Process faults. `kill:<service>` = SIGKILL to that service's process group, restarted after a pause
# (what a Deployment does); `broker-restart` = the in-memory broker killed and started empty on its port.
KILLABLE = ("placer-a", "placer-b", "binder-a", "binder-b", "collector-cluster", "collector-nodes")
BROKER_RESTART = "broker-restart"
PROCESS_FAULTS = (*(f"kill:{s}" for s in KILLABLE), BROKER_RESTART)


class FaultEvent(msgspec.Struct, frozen=True, kw_only=True):
    at_s: float  # seconds after the workload starts
    kind: str  # one of PROCESS_FAULTS


def schedule(*, seed: int, window_s: float, rounds: int = 1) -> tuple[FaultEvent, ...]:
    """Every process fault `rounds` times at seeded random moments within `window_s`, in time order.

    The broker restarts are kept apart (a third of the window / rounds) so that the system has to
    converge from the API server more than once rather than once for several.
    """
    rng = random.Random(seed)
    events = [
        FaultEvent(at_s=rng.uniform(0.05, 0.95) * window_s, kind=kind)
        for _ in range(rounds)
        for kind in PROCESS_FAULTS
        if kind != BROKER_RESTART
    ]
    slot = window_s / rounds
    events += [FaultEvent(at_s=(r + rng.uniform(0.3, 0.7)) * slot, kind=BROKER_RESTART) for r in range(rounds)]
    return tuple(sorted(events, key=lambda e: e.at_s))
