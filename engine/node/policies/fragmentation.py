"""fragmentation: FGD's node score (Weng et al., USENIX ATC 2023), for every vendor.

The measure is engine/node/fragmentation.py's, over the free shares the vendor reports
before and after the pod; the score is FGD's level of the change, then the tie term:

    score = trunc(100 / (1 + e^(delta / 1000))) + tie        delta = F(after) - F(before)

With no workload known it is binpack, answer for answer. For a pod taking a share of one
device it also ranks the candidate devices by the same level (FGD's device step).
F of a node shape, the workload's figures and the nodes' CPU are kept in the engine's
memo (fragment_memo.py): a decision recounts only the shapes it meets for the first time.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.memo import Memo
from engine.node.fragment_memo import FragmentMemo, WorkloadFigures
from engine.node.fragmentation import DIGITS, NodeCpu, PodShape, level, tie
from engine.node.policies.binpack import binpack_score
from engine.node.policy import NodeMeasures
from engine.node.vendor import NodeScore, SetChoice
from schemas.events import DeviceAssignment

# The delta counts to 1/1000 of a milli-device before it is binned into levels.
DELTA_DIGITS = 3


class Fragmentation:
    name = "fragmentation"
    packs = True  # its fallback without a workload is binpack
    hami = False
    reads_workload = True

    def __init__(self, memo: Memo) -> None:
        """F per node shape, the workload's figures and each node's CPU are kept in the engine's memo."""
        self._kept = FragmentMemo(memo)

    def score(self, measures: NodeMeasures, choice: SetChoice) -> NodeScore:
        workload = measures.request.workload
        if not workload:
            return binpack_score(measures, choice)
        figures = self._kept.figures(workload)
        cpu = self._policy_cpu(measures)
        before_shares = measures.free_shares(())
        before = self._kept.fragmentation(before_shares, figures, _cpu_free(measures, cpu, placed=False))
        # A pod without devices (CPU only) leaves the shares as they are: only its CPU moves F.
        after_shares = measures.free_shares(choice.assignments) if choice.assignments else before_shares
        after = self._kept.fragmentation(after_shares, figures, _cpu_free(measures, cpu, placed=True))
        delta = round(after - before, DELTA_DIGITS) + 0.0
        pod = PodShape(cpu_milli=measures.request.cpu_milli or 0, gpu_milli=measures.taken_milli(choice.assignments))
        free_after = sum(s.milli for s in after_shares)
        tie_term = tie(pod, cpu, len(after_shares), free_after, measures.busy(), figures.heavy)
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
        figures = self._kept.figures(workload)
        cpu = self._policy_cpu(measures)
        before = self._before(measures, figures, cpu)
        cpu_after = _cpu_free(measures, cpu, placed=True)
        measure = self._kept.fragmentation
        return [
            -level(round(measure(measures.free_shares(option), figures, cpu_after) - before, DELTA_DIGITS))
            for option in options
        ]

    def _policy_cpu(self, measures: NodeMeasures) -> NodeCpu | None:
        """The node's CPU when the policy weighs it (the request carries the pod's), else None."""
        return self._kept.node_cpu(measures.scratch.node) if measures.request.cpu_milli is not None else None

    def _before(self, measures: NodeMeasures, figures: WorkloadFigures, cpu: NodeCpu | None) -> float:
        return self._kept.fragmentation(measures.free_shares(()), figures, _cpu_free(measures, cpu, placed=False))


def _cpu_free(measures: NodeMeasures, cpu: NodeCpu | None, *, placed: bool) -> int | None:
    """The node's free CPU before the pod, or (`placed`) once it holds its CPU; None when not weighed."""
    return None if cpu is None else cpu.free - ((measures.request.cpu_milli or 0) if placed else 0)


Policy = Fragmentation
