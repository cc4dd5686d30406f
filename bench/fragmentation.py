"""The FGD paper's fragmentation measure (Weng et al., USENIX ATC 2023, section 3).

For a target workload described by its typical pod classes (the most common
pod shapes, covering 95 % of the pods, with their probabilities), a node's
fragmentation is the expected milli-GPU that the next pod cannot use:

  F(node) = sum over classes c of p_c * frag_c(node), where
  frag_c = all free milli-GPU of the node, if the node cannot host c at all
           (GPU model not accepted, too little CPU, or too few GPUs with enough free share);
         = the free share of each GPU whose free share is below c's per-GPU share, otherwise.

As in the paper's simulator, only CPU (not memory) enters the "can host" test,
and a CPU-only class never counts as hosted: every idle GPU of the node is a
fragment for it (the simulator's utils/frag.go counts only its "Q3 satisfied"
case as not fragmented, and a pod without GPUs never falls in that case).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec
import numpy as np

from bench.cluster import MILLI, ClusterState
from bench.trace import PodRow


class PodClass(msgspec.Struct, frozen=True, kw_only=True):
    cpu_milli: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    probability: float = 0.0


def typical_classes(
    pods: Sequence[PodRow], coverage: float = 0.95, *, include_cpu_only: bool = False
) -> list[PodClass]:
    """The most frequent pod shapes, in decreasing count, until `coverage` of the pods; renormalised.

    `include_cpu_only=False` counts GPU pods only (our earlier reading of the paper); the simulator
    counts every pod (utils/frag.go GetTypicalPods with CPU pods involved), CPU-only shapes included."""
    if not 0.0 < coverage <= 1.0:
        raise ValueError(f"coverage: {coverage} is not in (0, 1]")
    counts = Counter(
        (p.cpu_milli, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in pods if include_cpu_only or p.num_gpu > 0
    )
    total = sum(counts.values())
    if total == 0:
        return []
    # Ties in count are ordered by shape so that the cut is deterministic.
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    chosen: list[tuple[tuple[int, int, int, tuple[str, ...]], int]] = []
    covered = 0
    for key, count in ranked:
        if covered >= coverage * total:
            break
        chosen.append((key, count))
        covered += count
    return [
        PodClass(cpu_milli=k[0], num_gpu=k[1], gpu_milli=k[2], gpu_spec=k[3], probability=c / covered)
        for k, c in chosen
    ]


class FragmentationModel:
    """Per-node fragmentation against fixed pod classes, cached per node and updated on each placement."""

    def __init__(self, classes: Sequence[PodClass], state: ClusterState) -> None:
        if not classes:
            raise ValueError("classes: empty (the trace has no GPU pods)")
        self.classes = list(classes)
        self.p = np.array([c.probability for c in classes])
        self.cls_cpu = np.array([c.cpu_milli for c in classes], dtype=np.int64)
        self.cls_num = np.array([c.num_gpu for c in classes], dtype=np.int64)
        self.cls_milli = np.array([c.gpu_milli for c in classes], dtype=np.int64)
        self.gpu_class = self.cls_num > 0  # a CPU-only class is never hosted: all idle GPU is its fragment
        # access[c, m]: class c accepts GPU model m; the extra last column is "no GPU model" (never).
        access = np.zeros((len(classes), len(state.models) + 1), dtype=bool)
        for ci, c in enumerate(classes):
            for mi, model in enumerate(state.models):
                access[ci, mi] = not c.gpu_spec or model in c.gpu_spec
        self.access = access
        self.state = state
        self.node_model = np.where(state.model >= 0, state.model, len(state.models))
        self.ge = np.zeros((state.size, len(classes)), dtype=np.int64)  # GPUs with free >= class share
        self.lt = np.zeros((state.size, len(classes)), dtype=np.int64)  # free milli on GPUs below class share
        self.total = np.zeros(state.size, dtype=np.int64)
        self.frag = np.zeros(state.size)
        self.refresh(np.arange(state.size))

    def refresh(self, nodes: np.ndarray | int) -> None:
        """Recompute the cache for the given node(s) from the cluster state."""
        idx = np.atleast_1d(nodes)
        gpu = self.state.gpu_free[idx]
        valid = gpu >= 0
        free = np.where(valid, gpu, 0)
        below = (gpu[:, None, :] < self.cls_milli[None, :, None]) & valid[:, None, :]
        self.ge[idx] = (gpu[:, None, :] >= self.cls_milli[None, :, None]).sum(axis=2)
        self.lt[idx] = (free[:, None, :] * below).sum(axis=2)
        self.total[idx] = free.sum(axis=1)
        self.frag[idx] = self._frag(
            self.ge[idx], self.lt[idx], self.total[idx], self.state.cpu_free[idx], self.node_model[idx]
        )

    def _frag(
        self, ge: np.ndarray, lt: np.ndarray, total: np.ndarray, cpu_free: np.ndarray, model: np.ndarray
    ) -> np.ndarray:
        """Expected fragment; leading axes of ge/lt are candidates, last axis classes; total/cpu/model broadcast."""
        access = np.moveaxis(self.access[:, model], 0, -1)  # (..., C)
        hostable = access & (ge >= self.cls_num) & (cpu_free[..., None] >= self.cls_cpu) & self.gpu_class
        per_class = np.where(hostable, lt, total[..., None])
        expected: np.ndarray = per_class @ self.p
        return expected

    def cluster_fragmentation(self) -> float:
        return float(self.frag.sum())

    def after_whole(self, nodes: np.ndarray, pod: PodRow) -> np.ndarray:
        """Fragmentation of each node in `nodes` after taking `pod.num_gpu` fully free GPUs (none for a
        CPU-only pod) and its CPU."""
        n = pod.num_gpu
        return self._frag(
            self.ge[nodes] - n,  # a fully free GPU counted for every class; after, it is 0 and counts for none
            self.lt[nodes],  # a now-empty GPU adds 0 to the sub-share sum
            self.total[nodes] - n * MILLI,
            self.state.cpu_free[nodes] - pod.cpu_milli,
            self.node_model[nodes],
        )

    def after_share(self, nodes: np.ndarray, pod: PodRow) -> np.ndarray:
        """Fragmentation after putting the shared `pod` on each GPU of each node.

        Shape (nodes, GPU slots); inf where the share does not fit that GPU."""
        m = pod.gpu_milli
        f = self.state.gpu_free[nodes]  # (K, G)
        f_after = f - m
        milli = self.cls_milli
        ge = self.ge[nodes][:, None, :] - (f[..., None] >= milli) + (f_after[..., None] >= milli)
        lt = (
            self.lt[nodes][:, None, :]
            - (f[..., None] < milli) * np.maximum(f, 0)[..., None]
            + (f_after[..., None] < milli) * np.maximum(f_after, 0)[..., None]
        )
        total = np.broadcast_to((self.total[nodes] - m)[:, None], f.shape)
        cpu = np.broadcast_to((self.state.cpu_free[nodes] - pod.cpu_milli)[:, None], f.shape)
        model = np.broadcast_to(self.node_model[nodes][:, None], f.shape)
        out = self._frag(ge, lt, total, cpu, model)
        return np.where(f >= m, out, np.inf)


def node_fragmentation(gpu_free: Sequence[int], cpu_free: int, model: str, classes: Sequence[PodClass]) -> float:
    """Reference (scalar) form of the measure for one node; used to check the vectorised one."""
    total = sum(gpu_free)
    value = 0.0
    for c in classes:
        accepted = not c.gpu_spec or model in c.gpu_spec
        enough = sum(1 for f in gpu_free if f >= c.gpu_milli) >= c.num_gpu
        if c.num_gpu > 0 and accepted and enough and cpu_free >= c.cpu_milli:
            value += c.probability * sum(f for f in gpu_free if f < c.gpu_milli)
        else:
            value += c.probability * total
    return value
