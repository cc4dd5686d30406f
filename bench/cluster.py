"""The trace cluster as numpy arrays: free CPU, memory and per-GPU milli-GPU of every node.

Node scoring over all 1,213 nodes happens once per pod, so the state is kept
as arrays that policies score in one vectorised pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from bench.trace import NodeRow, PodRow

MILLI = 1000
ABSENT = -1  # a GPU slot the node does not have (nodes have 1-8 GPUs; arrays are padded)


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    node: int
    gpus: tuple[int, ...]  # GPU slot indices on that node; () for a CPU-only pod


class ClusterState:
    """Mutable free-resource arrays; `place` applies one pod, nothing else mutates them."""

    def __init__(self, nodes: Sequence[NodeRow], node_order: Sequence[int] | np.ndarray | None = None) -> None:
        """`node_order`: each node's rank in the order that breaks ties between equal scores
        (lowest rank wins); default: the list order (node-name order in the trace)."""
        self.names = [n.name for n in nodes]
        rank = np.arange(len(nodes)) if node_order is None else np.asarray(node_order, dtype=np.int64)
        if sorted(rank.tolist()) != list(range(len(nodes))):
            raise ValueError(f"node_order: not a permutation of 0..{len(nodes) - 1}")
        self.node_rank = rank
        self.models = sorted({n.model for n in nodes if n.model})
        model_index = {m: i for i, m in enumerate(self.models)}
        width = max(1, max(n.gpus for n in nodes))
        self.cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.gpu_count = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.model = np.array([model_index.get(n.model, -1) for n in nodes], dtype=np.int64)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        self.gpu_free = np.full((len(nodes), width), ABSENT, dtype=np.int64)
        for i, n in enumerate(nodes):
            self.gpu_free[i, : n.gpus] = MILLI
        self.capacity_milli = int(self.gpu_count.sum()) * MILLI
        self.allocated_milli = 0

    @property
    def size(self) -> int:
        return len(self.names)

    def model_mask(self, pod: PodRow) -> np.ndarray:
        """Nodes whose GPU model the pod accepts (gpu_spec empty = any GPU model)."""
        if pod.num_gpu == 0:
            return np.ones(self.size, dtype=bool)
        if not pod.gpu_spec:
            return self.gpu_count > 0
        allowed = [self.models.index(m) for m in pod.gpu_spec if m in self.models]
        return np.isin(self.model, allowed)

    def feasible(self, pod: PodRow) -> np.ndarray:
        """Nodes where CPU, memory, the GPU model and the GPUs all fit."""
        ok = self.model_mask(pod) & (self.cpu_free >= pod.cpu_milli) & (self.mem_free >= pod.memory_mib)
        if pod.num_gpu == 0:
            return ok
        if pod.gpu_milli < MILLI:
            gpus_ok = np.asarray((self.gpu_free >= pod.gpu_milli).any(axis=1))
        else:
            gpus_ok = np.asarray((self.gpu_free == MILLI).sum(axis=1) >= pod.num_gpu)
        fits: np.ndarray = ok & gpus_ok
        return fits

    def first_free_gpus(self, node: int, count: int) -> tuple[int, ...]:
        free = np.flatnonzero(self.gpu_free[node] == MILLI)
        return tuple(int(g) for g in free[:count])

    def tightest_gpu(self, node: int, milli: int) -> int:
        """The GPU with the least free share that still fits `milli` (lowest index on ties)."""
        row = self.gpu_free[node]
        fits = np.flatnonzero(row >= milli)
        return int(fits[np.argmin(row[fits])])

    def place(self, pod: PodRow, placement: Placement) -> None:
        i = placement.node
        if len(placement.gpus) != pod.num_gpu:
            raise ValueError(f"placement of {pod.name} names {len(placement.gpus)} GPUs, pod asks {pod.num_gpu}")
        self.cpu_free[i] -= pod.cpu_milli
        self.mem_free[i] -= pod.memory_mib
        for g in placement.gpus:
            if self.gpu_free[i, g] < pod.gpu_milli:
                raise ValueError(
                    f"GPU {g} of node {self.names[i]} has {self.gpu_free[i, g]} milli free, "
                    f"pod {pod.name} needs {pod.gpu_milli}"
                )
            self.gpu_free[i, g] -= pod.gpu_milli
        if self.cpu_free[i] < 0 or self.mem_free[i] < 0:
            raise ValueError(f"pod {pod.name} overcommits CPU or memory of node {self.names[i]}")
        self.allocated_milli += pod.gpu_milli_total

    def unallocated_gpu_pct(self) -> float:
        return 100.0 - 100.0 * self.allocated_milli / self.capacity_milli
