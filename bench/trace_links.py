"""Link quality of the multi-GPU pods' device sets in the trace replay.

The trace has no interconnect, so each node gets its documented machine
topology (`bench.trace_topology`). For every pod placed on two or more GPUs,
the chosen set's pair-score sum is compared with the best set of the same size
among the node's fully free GPUs at that moment (`bench.links`: the engine's
pair table; 100 % = a link-optimal set).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from bench.cluster import MILLI, ClusterState
from bench.links import PairTable, optimum
from bench.trace_topology import trace_machine


@cache
def _machine_table(model: str, gpus: int) -> PairTable:
    machine = trace_machine(model, gpus)
    return PairTable([d.index for d in machine.devices], machine.links, [d.numa_node for d in machine.devices])


def node_pair_table(state: ClusterState, node: int) -> PairTable:
    """The pair-score table of a trace node's documented topology (positions = GPU slots)."""
    return _machine_table(state.models[int(state.model[node])], int(state.gpu_count[node]))


class TraceLinkMeter:
    """Scores each multi-GPU placement against the optimum over the node's free GPUs."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.best: dict[tuple[str, int, tuple[int, ...], int], int] = {}
        self.quality: list[float] = []

    def observe(self, node: int, gpus: Sequence[int]) -> None:
        """Call before the placement is applied: the optimum is over the GPUs free at decision time."""
        if len(gpus) < 2:
            return
        table = node_pair_table(self.state, node)
        free = tuple(int(g) for g in np.flatnonzero(self.state.gpu_free[node] == MILLI))
        key = (self.state.models[int(self.state.model[node])], table.size, free, len(gpus))
        if key not in self.best:
            self.best[key] = optimum(table, free, len(gpus))
        best = self.best[key]
        self.quality.append(100.0 if best <= 0 else 100.0 * table.set_score(gpus) / best)

    @property
    def mean_pct(self) -> float:
        return float(np.mean(self.quality)) if self.quality else 100.0

    @property
    def optimal_pct(self) -> float:
        return float(100.0 * np.mean(np.array(self.quality) >= 100.0 - 1e-9)) if self.quality else 100.0
