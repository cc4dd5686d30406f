"""The cluster's workload mix, learned from the pods the placer is asked to place.

The `fragmentation` node policy needs the typical pod classes and how common
each is (FGD's target workload). The placer counts the pods it sees in a
sliding window and offers the engine the most common classes that together
cover `coverage` of them. With `with_cpu` (the cluster's policy is
fragmentation, and the placer's index reads each node's CPU) a class is
(GPUs, share, CPU) and CPU-only pods count too, as in FGD; without it only
NVIDIA pods count, by (GPUs, share). It is a statistic, not state: after a
restart it is empty, and the policy places like binpack until pods have been
seen again.
"""

from __future__ import annotations

from collections import Counter, deque

from engine import WorkloadClass
from engine.core.model import MILLI
from engine.node.vendors.nvidia import GPU, GPUCORES
from schemas.events import PendingPodEvent
from schemas.quantity import QuantityError, milli_value

Shape = tuple[int, int, int]  # (devices, thousandths of each, milli-CPU)


def pod_class(pending: PendingPodEvent, *, with_cpu: bool = False) -> Shape | None:
    """(devices, thousandths of each, milli-CPU) of an NVIDIA pod, or with `with_cpu` of a pod asking no
    device at all; CPU 0 without `with_cpu`. None for other pods or unreadable counts."""
    try:
        gpus = int(pending.requests.get(GPU, "0"))
        cores = int(pending.requests.get(GPUCORES, "0"))
        cpu = milli_value(pending.requests.get("cpu", "0")) if with_cpu else 0
    except (ValueError, QuantityError):
        return None  # the engine reports the bad quantity on the pod itself
    if gpus < 1:
        asks_devices = any(name != "cpu" and "/" in name for name in pending.requests)
        return (0, MILLI, cpu) if with_cpu and not asks_devices and cpu > 0 else None
    # A share is as large as its compute share; a pod naming no share (or all of it) takes whole devices.
    milli = cores * 10 if 0 < cores < 100 else MILLI
    return gpus, milli, cpu


class WorkloadMix:
    def __init__(self, *, window: int = 2000, coverage: float = 0.95, with_cpu: bool = False) -> None:
        if window < 1:
            raise ValueError(f"window: must be at least 1, got {window}")
        if not 0 < coverage <= 1:
            raise ValueError(f"coverage: must be in (0, 1], got {coverage}")
        self._with_cpu = with_cpu
        self._seen: deque[Shape] = deque(maxlen=window)
        self._counts: Counter[Shape] = Counter()
        self._coverage = coverage
        self._classes: tuple[WorkloadClass, ...] | None = ()

    def observe(self, pending: PendingPodEvent) -> None:
        shape = pod_class(pending, with_cpu=self._with_cpu)
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
            for (gpus, milli, cpu), count in ordered:
                chosen.append(WorkloadClass(gpus=gpus, milli=milli, weight=count / total, cpu_milli=cpu))
                covered += count
                if covered >= self._coverage * total:
                    break
            self._classes = tuple(chosen)
        return self._classes
