"""Node-scoring policies of the FGD paper, reimplemented for the trace replay.

Sources: Weng et al., "Beware of Fragmentation", USENIX ATC 2023 (sections 3,
5, 6), and the descriptions and score formulas of its public simulator
(hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin). No code was
copied. Each policy scores every feasible node for one pod; the highest score
wins and ties are broken uniformly at random (what kube-scheduler's host
selection does). Guesses are listed in bench/README.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from bench.cluster import MILLI, ClusterState, Placement
from bench.fragmentation import FragmentationModel, PodClass
from bench.trace import PodRow


class TracePolicy(Protocol):
    name: str

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement | None: ...

    def placed(self, pod: PodRow, placement: Placement) -> None: ...


def pick_best(scores: np.ndarray, candidates: np.ndarray, rng: np.random.Generator | None) -> int:
    """The candidate with the highest score: uniformly at random among ties, or the first
    (lowest node index = node-name order) when no generator is given."""
    best = scores.max()
    tied = np.flatnonzero(scores >= best - 1e-9)
    return int(candidates[tied[0] if len(tied) == 1 or rng is None else rng.choice(tied)])


class _Base:
    """Device choice inside the chosen node shared by the non-FGD policies (a guess, see README):
    a shared pod goes to the GPU with the least free share that fits, whole-GPU pods take the
    lowest-index fully free GPUs."""

    name = "base"
    random_ties = True  # kube-scheduler's host selection; False = first node in name order

    def __init__(self, state: ClusterState, classes: Sequence[PodClass]) -> None:
        self.state = state
        self.max_cpu = float(state.cpu_cap.max())
        self.max_gpu = float(state.gpu_count.max() * MILLI)

    def devices(self, pod: PodRow, node: int) -> Placement:
        if pod.num_gpu == 0:
            return Placement(node=node, gpus=())
        if pod.gpu_milli < MILLI:
            return Placement(node=node, gpus=(self.state.tightest_gpu(node, pod.gpu_milli),))
        return Placement(node=node, gpus=self.state.first_free_gpus(node, pod.num_gpu))

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def tie_rng(self, rng: np.random.Generator) -> np.random.Generator | None:
        return rng if self.random_ties else None

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement:
        return self.devices(pod, pick_best(self.scores(pod, candidates), candidates, self.tie_rng(rng)))

    def placed(self, pod: PodRow, placement: Placement) -> None:
        return None

    def gpu_left(self, candidates: np.ndarray) -> np.ndarray:
        gpu = self.state.gpu_free[candidates]
        left: np.ndarray = np.where(gpu >= 0, gpu, 0).sum(axis=1)
        return left


class RandomFit(_Base):
    """Any feasible node, uniformly."""

    name = "random-fit"

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        return np.zeros(len(candidates))


class BestFit(_Base):
    """Least weighted free CPU and GPU left after placing (weights 0.5/0.5, normalised by the largest node)."""

    name = "best-fit"

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        cpu_left = (self.state.cpu_free[candidates] - pod.cpu_milli) / self.max_cpu
        gpu_left = (self.gpu_left(candidates) - pod.gpu_milli_total) / self.max_gpu
        score: np.ndarray = 1.0 - (0.5 * cpu_left + 0.5 * gpu_left)
        return score


class DotProduct(_Base):
    """Tetris's alignment, as the simulator turns it: the smaller the dot product of the node's free
    (CPU, GPU) vector and the pod's request, both normalised by the largest node, the better."""

    name = "dot-product"

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        node_cpu = self.state.cpu_free[candidates] / self.max_cpu
        node_gpu = self.gpu_left(candidates) / self.max_gpu
        dot = node_cpu * (pod.cpu_milli / self.max_cpu) + node_gpu * (pod.gpu_milli_total / self.max_gpu)
        score: np.ndarray = 1.0 - dot / 2.0
        return score


class GpuPacking(_Base):
    """Prefer (1) already shared GPUs, then (2) free GPUs on a used node, then (3) an idle node."""

    name = "gpu-packing"

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        if pod.num_gpu == 0:
            return np.zeros(len(candidates))
        gpu = self.state.gpu_free[candidates]
        count = self.state.gpu_count[candidates]
        fully_free = (gpu == MILLI).sum(axis=1)
        idle_node = np.maximum(100 // 3 - fully_free, fully_free)  # case 3, with the simulator's cap
        if pod.gpu_milli < MILLI:
            # The one GPU used is the tightest that fits; case 1 if it is already shared.
            fits = np.where(gpu >= pod.gpu_milli, gpu, MILLI + 1)
            tightest = fits.min(axis=1)
            shared = np.maximum(100 - (tightest * 100 // MILLI) // 10, 50)
            used_node = np.where(tightest == MILLI, max(50 - 1, 100 // 3), shared)
        else:
            used_node = np.full(len(candidates), max(50 - pod.num_gpu, 100 // 3))
        return np.where(fully_free == count, idle_node, used_node).astype(float)


class GpuClustering(_Base):
    """Put pods of the same GPU affinity together: a node holding only this affinity first, then a node
    holding it among others, then an idle node, then any; packed nodes first within a tier. The affinity
    is the simulator's: "share" for every fractional pod, "<n>-gpu" for whole-GPU pods."""

    name = "gpu-clustering"

    def __init__(self, state: ClusterState, classes: Sequence[PodClass]) -> None:
        super().__init__(state, classes)
        self.tags: dict[str, int] = {}
        self.tag_count = np.zeros((state.size, 0), dtype=np.int64)

    def _tag(self, pod: PodRow) -> int:
        key = "share" if pod.gpu_milli < MILLI else f"{pod.num_gpu}-gpu"
        if key not in self.tags:
            self.tags[key] = len(self.tags)
            self.tag_count = np.hstack([self.tag_count, np.zeros((self.state.size, 1), dtype=np.int64)])
        return self.tags[key]

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        if pod.num_gpu == 0:
            return np.zeros(len(candidates))
        t = self._tag(pod)
        counts = self.tag_count[candidates]
        has = counts[:, t] > 0
        kinds = (counts > 0).sum(axis=1)
        tier = np.where(has & (kinds == 1), 3, np.where(has, 2, np.where(kinds == 0, 1, 0)))
        packed = (self.max_gpu - self.gpu_left(candidates)) / self.max_gpu
        return 25.0 * packed + 25.0 * tier

    def placed(self, pod: PodRow, placement: Placement) -> None:
        if pod.num_gpu:
            tag = self._tag(pod)  # may widen the array: take the tag before indexing it
            self.tag_count[placement.node, tag] += 1


class Fgd(_Base):
    """Fragmentation Gradient Descent: the node (and GPU) whose fragmentation grows least."""

    name = "fgd"

    def __init__(self, state: ClusterState, classes: Sequence[PodClass]) -> None:
        super().__init__(state, classes)
        self.model = FragmentationModel(classes, state)

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement:
        rng_or_none = self.tie_rng(rng)
        before = self.model.frag[candidates]
        if 0 < pod.gpu_milli < MILLI:  # a share of one GPU
            # Nodes in the same state (model, free CPU, free share per GPU) score the same:
            # score one of each and copy (early in the replay most nodes are still identical).
            keys = np.column_stack(
                [self.model.node_model[candidates], self.state.cpu_free[candidates], self.state.gpu_free[candidates]]
            )
            _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
            after = self.model.after_share(candidates[first], pod)[inverse.reshape(-1)]  # (K, G)
            gain = before[:, None] - after
            best_gpu = np.argmax(gain, axis=1)  # lowest index among a node's equal GPUs
            node = pick_best(gain[np.arange(len(candidates)), best_gpu], candidates, rng_or_none)
            return Placement(node=node, gpus=(int(best_gpu[np.flatnonzero(candidates == node)[0]]),))
        after = self.model.after_whole(candidates, pod)  # also a CPU-only pod: it takes no GPU
        node = pick_best(before - after, candidates, rng_or_none)
        return Placement(node=node, gpus=self.state.first_free_gpus(node, pod.num_gpu))

    def placed(self, pod: PodRow, placement: Placement) -> None:
        self.model.refresh(placement.node)


PolicyFactory = Callable[[ClusterState, Sequence[PodClass]], TracePolicy]

PAPER_POLICIES: dict[str, PolicyFactory] = {
    RandomFit.name: RandomFit,
    DotProduct.name: DotProduct,
    GpuClustering.name: GpuClustering,
    GpuPacking.name: GpuPacking,
    BestFit.name: BestFit,
    Fgd.name: Fgd,
}

FIRST_TIE_SUFFIX = "/first-tie"


def with_first_tie(policy: type[_Base]) -> type[_Base]:
    """The same policy with ties going to the first node in name order instead of a random one.

    The artifact's tie handling is not something we could read; this variant shows how much the
    figure depends on it (a sensitivity check, reported beside the random-tie figure)."""
    return type(policy.__name__ + "FirstTie", (policy,), {"name": policy.name + FIRST_TIE_SUFFIX, "random_ties": False})


# Means at 100 % arrived GPU demand, Weng et al. ATC'23 (default trace, 10 seeds).
PUBLISHED_UNALLOCATED_PCT: dict[str, float] = {
    "random-fit": 13.70,
    "dot-product": 9.38,
    "gpu-clustering": 8.35,
    "gpu-packing": 8.22,
    "best-fit": 7.14,
    "fgd": 4.77,
}
