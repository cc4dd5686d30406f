"""The cluster's workload mix, learned from the pods the placer is asked to place.

The `fragmentation` node policy needs the typical pod classes and how common
each is (FGD's target workload). The placer counts the NVIDIA pods it sees in a
sliding window and offers the engine the most common classes that together
cover `coverage` of them. It is a statistic, not state: after a restart it is
empty, and the policy places like binpack until pods have been seen again.
"""

from __future__ import annotations

from collections import Counter, deque

from schemas.events import PendingPodEvent
from services.placer.engine import WorkloadClass
from services.placer.engine.model import MILLI
from services.placer.engine.vendors.nvidia import GPU, GPUCORES


def pod_class(pending: PendingPodEvent) -> tuple[int, int] | None:
    """(devices, thousandths of each) of an NVIDIA pod; None for other pods or unreadable counts."""
    try:
        gpus = int(pending.requests.get(GPU, "0"))
        cores = int(pending.requests.get(GPUCORES, "0"))
    except ValueError:
        return None  # the engine reports the bad quantity on the pod itself
    if gpus < 1:
        return None
    # A share is as large as its compute share; a pod naming no share (or all of it) takes whole devices.
    milli = cores * 10 if 0 < cores < 100 else MILLI
    return gpus, milli


class WorkloadMix:
    def __init__(self, *, window: int = 2000, coverage: float = 0.95) -> None:
        if window < 1:
            raise ValueError(f"window: must be at least 1, got {window}")
        if not 0 < coverage <= 1:
            raise ValueError(f"coverage: must be in (0, 1], got {coverage}")
        self._seen: deque[tuple[int, int]] = deque(maxlen=window)
        self._counts: Counter[tuple[int, int]] = Counter()
        self._coverage = coverage
        self._classes: tuple[WorkloadClass, ...] | None = ()

    def observe(self, pending: PendingPodEvent) -> None:
        shape = pod_class(pending)
        if shape is None:
            return
        if len(self._seen) == self._seen.maxlen:
            oldest = self._seen[0]
            self._counts[oldest] -= 1
            if not self._counts[oldest]:
                del self._counts[oldest]
        self._seen.append(shape)
        self._counts[shape] += 1
        self._classes = None  # recomputed when next asked

    def classes(self) -> tuple[WorkloadClass, ...]:
        """The most common classes covering `coverage` of the window, weighted by count; ties by shape."""
        if self._classes is None:
            total = len(self._seen)
            ordered = sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0]))
            chosen: list[WorkloadClass] = []
            covered = 0
            for (gpus, milli), count in ordered:
                chosen.append(WorkloadClass(gpus=gpus, milli=milli, weight=count / total))
                covered += count
                if covered >= self._coverage * total:
                    break
            self._classes = tuple(chosen)
        return self._classes
