"""The fragmentation measure kept per node shape, so that a decision looks it up instead of recounting it.

F(node) (fragmentation.py) reads only three things: the workload, the multiset of the
node's free shares (each device's free milli, idleness and model; the order of the
devices does not matter, every class sums or counts over them) and which classes the
node's free CPU turns away (`cpu_milli > cpu_free`). The last is fixed between two
consecutive distinct CPU figures of the workload, so the free CPU counts only by its
*bucket*: how many of those figures it reaches. A node's F is therefore kept under
(workload id, sorted free shares, CPU bucket), and every node, candidate choice and
decision with the same shape reads the figure computed first, bit for bit (a miss
counts it as `fragmentation` does, with each class's model test kept per device model).

The workload's own figures (its CPU buckets, its CPU-per-GPU median) are kept per
workload, found by identity first (callers pass one tuple for many decisions).
Both tables are the engine's (its memo): with the memo off every figure is computed afresh.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from engine.core.memo import BoundedCache, IdentityCache, Interner, Memo
from engine.core.model import MILLI, NodeState, WorkloadClass
from engine.node.fragmentation import DIGITS, FreeShare, NodeCpu, accepts, fragmentation, heavy_ratio, node_cpu

FRAGMENT_BOUND = 65_536  # node shapes whose F is kept (a few per node of a large cluster)
WORKLOAD_BOUND = 64  # workloads whose figures are kept (a cluster has one at a time)
CPU_BOUND = 16_384  # (allocatable, requested) CPU quantities read

Shape = tuple[tuple[int, bool, str], ...]


class WorkloadFigures:
    """What the measure and the tie term read of one workload, computed once per workload."""

    __slots__ = ("workload", "key", "cpu_limits", "heavy", "_accepts")

    def __init__(self, workload: tuple[WorkloadClass, ...], key: int) -> None:
        self.workload = workload
        self.key = key  # the workload's id in the engine's interner: part of every fragment key
        self.cpu_limits = tuple(sorted({c.cpu_milli for c in workload}))
        self.heavy = heavy_ratio(workload)
        self._accepts: dict[str, tuple[bool, ...]] = {}  # per device model: which classes accept it

    def measure(self, shares: Sequence[FreeShare], cpu_free: int | None) -> float:
        """`fragmentation(shares, workload, cpu_free)`, the same figure bit for bit (the same integer
        fragment per class, summed in the same order), with each class's model test read per model."""
        workload = self.workload
        total_weight = sum(c.weight for c in workload)
        if total_weight <= 0:
            return 0.0
        free = sum(s.milli for s in shares)
        accepts = [self._accepts_of(s.model) for s in shares]
        fragments: list[int] = []
        for at, c in enumerate(workload):
            if c.gpus == 0 or (cpu_free is not None and c.cpu_milli > cpu_free):
                fragments.append(free)
                continue
            whole = c.milli >= MILLI
            usable = 0
            usable_milli = 0
            for share, accepted in zip(shares, accepts, strict=True):
                if accepted[at] and (share.idle and share.milli >= MILLI if whole else share.milli >= c.milli):
                    usable += 1
                    usable_milli += share.milli
            fragments.append(free if usable < c.gpus else free - usable_milli)
        value = sum(c.weight * f for c, f in zip(workload, fragments, strict=True)) / total_weight
        return round(value, DIGITS)

    def _accepts_of(self, model: str) -> tuple[bool, ...]:
        found = self._accepts.get(model)
        if found is None:
            found = self._accepts[model] = tuple(accepts(c, model) for c in self.workload)
        return found

    def cpu_bucket(self, cpu_free: int | None) -> int:
        """How many of the workload's CPU figures `cpu_free` reaches: the classes it turns away are
        exactly those above it (None: CPU not weighed, no class turned away, as when it reaches all)."""
        if cpu_free is None:
            return len(self.cpu_limits)
        return bisect.bisect_right(self.cpu_limits, cpu_free)


class FragmentMemo:
    """One engine's fragmentation figures: per workload, per node shape, per node CPU quantity."""

    def __init__(self, memo: Memo) -> None:
        self._memo = memo
        self._figures: IdentityCache[tuple[WorkloadClass, ...], WorkloadFigures] = memo.identity(WORKLOAD_BOUND)
        self._by_value: BoundedCache[tuple[WorkloadClass, ...], WorkloadFigures] = memo.table(WORKLOAD_BOUND)
        self._workload_ids: Interner[tuple[WorkloadClass, ...]] = memo.interner(WORKLOAD_BOUND)
        self._fragments: BoundedCache[tuple[int, int, Shape], float] = memo.table(FRAGMENT_BOUND)
        self._cpus: BoundedCache[tuple[str | None, str | None], tuple[NodeCpu | None]] = memo.table(CPU_BOUND)

    def figures(self, workload: tuple[WorkloadClass, ...]) -> WorkloadFigures:
        """The workload's figures (with the memo off, computed afresh)."""
        if not self._memo.enabled:
            return WorkloadFigures(workload, 0)
        found = self._figures.get(workload)
        if found is None:
            found = self._by_value.get(workload)
            if found is None:
                found = WorkloadFigures(workload, self._workload_ids.id_of(workload))
                self._by_value.put(workload, found)
            self._figures.put(workload, found)
        return found

    def fragmentation(self, shares: Sequence[FreeShare], figures: WorkloadFigures, cpu_free: int | None) -> float:
        """F(node) of `shares` with `cpu_free` against the workload, kept by the node's shape."""
        if not self._memo.enabled:
            return fragmentation(shares, figures.workload, cpu_free)
        shape = tuple(sorted([(s.milli, s.idle, s.model) for s in shares]))
        key = (figures.key, figures.cpu_bucket(cpu_free), shape)
        found = self._fragments.get(key)
        if found is None:
            found = figures.measure(shares, cpu_free)
            self._fragments.put(key, found)
        return found

    def node_cpu(self, node: NodeState) -> NodeCpu | None:
        """`node_cpu(node)`, kept by the node's two CPU quantities (their parse is most of its cost)."""
        if not self._memo.enabled:
            return node_cpu(node)
        allocatable = node.allocatable.get("cpu") if node.allocatable is not None else None
        key = (allocatable, node.requested.get("cpu"))
        found = self._cpus.get(key)
        if found is None:
            found = (node_cpu(node),)
            self._cpus.put(key, found)
        return found[0]
