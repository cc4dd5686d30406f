"""fragmentation: FGD's node score (Weng et al., USENIX ATC 2023), for every vendor.

The measure is engine/node/fragmentation.py's, over the free shares the vendor reports
before and after the pod; the score is FGD's level of the change, then the tie term:

    score = trunc(100 / (1 + e^(delta / 1000))) + tie        delta = F(after) - F(before)

With no workload known it is binpack, answer for answer. For a pod taking a share of one
device it also ranks the candidate devices by the same level (FGD's device step).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.memo import BoundedCache, Memo
from engine.core.model import WorkloadClass
from engine.node.fragmentation import DIGITS, NodeCpu, PodShape, fragmentation, heavy_ratio, level, node_cpu, tie
from engine.node.policies.binpack import binpack_score
from engine.node.policy import NodeMeasures
from engine.node.vendor import NodeScore, SetChoice
from schemas.events import DeviceAssignment

# The delta counts to 1/1000 of a milli-device before it is binned into levels.
DELTA_DIGITS = 3
HEAVY_BOUND = 64  # workloads whose CPU-per-device median is kept


class Fragmentation:
    name = "fragmentation"
    packs = True  # its fallback without a workload is binpack
    hami = False
    reads_workload = True

    def __init__(self, memo: Memo) -> None:
        """The workload's CPU-per-device median is kept per workload (a cluster has one at a time)."""
        self._memo = memo
        self._heavy: BoundedCache[tuple[WorkloadClass, ...], tuple[float | None]] = memo.table(HEAVY_BOUND)

    def score(self, measures: NodeMeasures, choice: SetChoice) -> NodeScore:
        workload = measures.request.workload
        if not workload:
            return binpack_score(measures, choice)
        cpu = _policy_cpu(measures)
        before = _before(measures, cpu)
        after_shares = measures.free_shares(choice.assignments)
        after = fragmentation(after_shares, workload, _cpu_free(measures, cpu, placed=True))
        delta = round(after - before, DELTA_DIGITS) + 0.0
        pod = PodShape(cpu_milli=measures.request.cpu_milli or 0, gpu_milli=measures.taken_milli(choice.assignments))
        free_after = sum(s.milli for s in after_shares)
        tie_term = tie(pod, cpu, len(after_shares), free_after, measures.busy(), self._heavy_ratio(workload))
        frag_level = level(delta)
        return NodeScore(
            score=round(frag_level + tie_term, DIGITS),
            parts={"frag_delta": delta, "frag_level": float(frag_level), "tie": tie_term},
        )

    def device_ranks(self, measures: NodeMeasures, options: Sequence[tuple[DeviceAssignment, ...]]) -> list[int] | None:
        """Minus FGD's level of each option's change: the least fragmenting first."""
        workload = measures.request.workload
        if not workload:
            return None
        cpu = _policy_cpu(measures)
        before = _before(measures, cpu)
        cpu_after = _cpu_free(measures, cpu, placed=True)
        return [
            -level(round(fragmentation(measures.free_shares(option), workload, cpu_after) - before, DELTA_DIGITS))
            for option in options
        ]

    def _heavy_ratio(self, workload: tuple[WorkloadClass, ...]) -> float | None:
        found = self._memo.remembered(self._heavy, lambda: workload, lambda: (heavy_ratio(workload),))
        return found[0]


def _policy_cpu(measures: NodeMeasures) -> NodeCpu | None:
    """The node's CPU when the policy weighs it (the request carries the pod's), else None."""
    return node_cpu(measures.scratch.node) if measures.request.cpu_milli is not None else None


def _cpu_free(measures: NodeMeasures, cpu: NodeCpu | None, *, placed: bool) -> int | None:
    """The node's free CPU before the pod, or (`placed`) once it holds its CPU; None when not weighed."""
    return None if cpu is None else cpu.free - ((measures.request.cpu_milli or 0) if placed else 0)


def _before(measures: NodeMeasures, cpu: NodeCpu | None) -> float:
    return fragmentation(measures.free_shares(()), measures.request.workload, _cpu_free(measures, cpu, placed=False))


Policy = Fragmentation
