"""Node-scoring policies of the FGD paper, reimplemented for the trace replay.

Sources: Weng et al., "Beware of Fragmentation", USENIX ATC 2023 (sections 3,
5, 6), and the score rules of its public simulator
(hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin). No code was
copied. Each policy scores every feasible node for one pod; the highest score
wins. Two settings make the reference protocol (bench/README.md lists each rule
with the simulator file it comes from):

- resolution: the simulator's integer scores (`Resolution.SIMULATOR`, the
  reference) or exact floats (`Resolution.EXACT`, our earlier replay);
- ties: the lowest rank in the cluster's node order (`Ties.NODE_ORDER`, the
  reference: the simulator's node names carry a per-seed random prefix and the
  smallest name wins), a uniformly random node, or the first in list order.
"""

from __future__ import annotations

import enum
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


MAX_NODE_SCORE = 100  # kube-scheduler's framework.MaxNodeScore
MAX_SPEC_CPU = 128_000  # the simulator's normalisers (open-gpu-share/utils/const.go)
MAX_SPEC_GPU = 8_000


class Ties(enum.StrEnum):
    NODE_ORDER = "node-order"  # lowest rank in the cluster's node order (the simulator, per-seed order)
    RANDOM = "random"  # uniformly at random among the tied nodes
    FIRST = "first"  # the first in the node list (trace name order)


class Resolution(enum.StrEnum):
    SIMULATOR = "simulator"  # the simulator's integer node scores
    EXACT = "exact"  # exact floats (our earlier replay)


def pick_best(
    scores: np.ndarray, candidates: np.ndarray, rng: np.random.Generator | None, rank: np.ndarray | None = None
) -> int:
    """The candidate with the highest score. Ties: the lowest `rank[node]` when a rank is given,
    else uniformly at random when a generator is given, else the first candidate (lowest index)."""
    best = scores.max()
    tied = np.flatnonzero(scores >= best - 1e-9)
    if len(tied) == 1:
        return int(candidates[tied[0]])
    if rank is not None:
        return int(candidates[tied[np.argmin(rank[candidates[tied]])]])
    return int(candidates[tied[0] if rng is None else rng.choice(tied)])


def normalise_scores(raw: np.ndarray) -> np.ndarray:
    """kube-scheduler-style NormalizeScore (simulator plugin_utils.go): min..max onto 0..100 in integer
    arithmetic; all 0 when every node scores the same."""
    low, high = int(raw.min()), int(raw.max())
    if high == low:
        return np.zeros(len(raw), dtype=np.int64)
    out: np.ndarray = (raw.astype(np.int64) - low) * MAX_NODE_SCORE // (high - low)
    return out


def fgd_score(gain: np.ndarray) -> np.ndarray:
    """The simulator's FGD node score: int64(sigmoid(gain / 1000) * 100), gain in milli-GPU
    (fgd_score.go; truncation toward zero, the score is never negative)."""
    with np.errstate(over="ignore", invalid="ignore"):
        score = np.trunc(1.0 / (1.0 + np.exp(-gain / 1000.0)) * MAX_NODE_SCORE)
    out: np.ndarray = np.where(np.isneginf(gain), -np.inf, score)  # a GPU the share does not fit stays out
    return out


_ROW_HASH = np.random.default_rng(20230710).integers(1, 2**62, size=64, dtype=np.int64) | 1


def distinct_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, inverse) as `np.unique(keys, axis=0)` gives them, for an integer matrix: rows are hashed to
    one int64 (wrapping dot product with fixed odd multipliers), which sorts far faster than rows; the
    result is checked and the row-wise unique used in the (never yet seen) case of a hash collision."""
    with np.errstate(over="ignore"):
        hashed = keys.astype(np.int64) @ _ROW_HASH[: keys.shape[1]]
    _, first, inverse = np.unique(hashed, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(keys[first][inverse], keys):
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    return first, inverse


class _Base:
    """Device choice inside the chosen node shared by the non-FGD policies (the simulator's best-fit GPU
    choice, open_gpu_share.go): a shared pod goes to the GPU with the least free share that fits (first
    on ties), whole-GPU pods take the lowest-index fully free GPUs."""

    name = "base"
    ties = Ties.NODE_ORDER
    resolution = Resolution.SIMULATOR

    def __init__(self, state: ClusterState, classes: Sequence[PodClass]) -> None:
        self.state = state
        if self.resolution is Resolution.SIMULATOR:
            self.max_cpu, self.max_gpu = float(MAX_SPEC_CPU), float(MAX_SPEC_GPU)
        else:
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

    def pick(self, scores: np.ndarray, candidates: np.ndarray, rng: np.random.Generator) -> int:
        if self.ties is Ties.NODE_ORDER:
            return pick_best(scores, candidates, None, self.state.node_rank)
        return pick_best(scores, candidates, rng if self.ties is Ties.RANDOM else None)

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement:
        return self.devices(pod, self.pick(self.scores(pod, candidates), candidates, rng))

    def placed(self, pod: PodRow, placement: Placement) -> None:
        return None

    def gpu_left(self, candidates: np.ndarray) -> np.ndarray:
        gpu = self.state.gpu_free[candidates]
        left: np.ndarray = np.where(gpu >= 0, gpu, 0).sum(axis=1)
        return left


class RandomFit(_Base):
    """Any feasible node, uniformly (random_score.go: one node drawn per pod gets the top score); with the
    simulator's resolution a shared pod also takes a uniformly random GPU that fits (the experiments run
    random-fit with GPU selection "random": open_gpu_share.go allocateGpuIdBasedOnRandomFit)."""

    name = "random-fit"

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        return np.zeros(len(candidates))

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement:
        node = int(candidates[rng.integers(len(candidates))])
        if self.resolution is Resolution.SIMULATOR and 0 < pod.gpu_milli < MILLI:
            fits = np.flatnonzero(self.state.gpu_free[node] >= pod.gpu_milli)
            return Placement(node=node, gpus=(int(fits[rng.integers(len(fits))]),))
        return self.devices(pod, node)


class BestFit(_Base):
    """Least weighted free CPU and GPU left after placing (weights 0.5/0.5, normalised by the largest node)."""

    name = "best-fit"

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        cpu_left = (self.state.cpu_free[candidates] - pod.cpu_milli) / self.max_cpu
        gpu_left = (self.gpu_left(candidates) - pod.gpu_milli_total) / self.max_gpu
        if self.resolution is Resolution.EXACT:
            score: np.ndarray = 1.0 - (0.5 * cpu_left + 0.5 * gpu_left)
            return score
        # best_fit_score.go: int64((1 - weighted left) * 100), then NormalizeScore over the nodes.
        raw = np.trunc((1.0 - (cpu_left * 0.5 + gpu_left * 0.5)) * MAX_NODE_SCORE).astype(np.int64)
        return normalise_scores(raw)


class DotProduct(_Base):
    """Tetris's alignment, as the simulator turns it: the smaller the dot product of the node's free
    (CPU, GPU) vector and the pod's request, both normalised by the largest node, the better."""

    name = "dot-product"

    def scores(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        node_cpu = self.state.cpu_free[candidates] / self.max_cpu
        node_gpu = self.gpu_left(candidates) / self.max_gpu
        dot = node_cpu * (pod.cpu_milli / self.max_cpu) + node_gpu * (pod.gpu_milli_total / self.max_gpu)
        score: np.ndarray = 1.0 - dot / 2.0
        if self.resolution is Resolution.SIMULATOR:  # dot_product_score.go: int64(100 * score)
            score = np.trunc(MAX_NODE_SCORE * score)
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
        quarter = MAX_NODE_SCORE // 4
        if self.resolution is Resolution.SIMULATOR:  # gpu_clustering_score.go, integer arithmetic
            used = (MAX_SPEC_GPU - self.gpu_left(candidates)).astype(np.int64)
            banded: np.ndarray = (quarter * used // MAX_SPEC_GPU + quarter * tier).astype(float)
            return banded
        packed = (self.max_gpu - self.gpu_left(candidates)) / self.max_gpu
        score: np.ndarray = quarter * packed + quarter * tier
        return score

    def placed(self, pod: PodRow, placement: Placement) -> None:
        if pod.num_gpu:
            tag = self._tag(pod)  # may widen the array: take the tag before indexing it
            self.tag_count[placement.node, tag] += 1


class Fgd(_Base):
    """Fragmentation Gradient Descent: the node (and GPU) whose fragmentation grows least.

    With the simulator's resolution (fgd_score.go) every candidate GPU and node scores
    int64(sigmoid(gain / 1000) * 100); inside a node the first GPU with the top score wins."""

    name = "fgd"

    def __init__(self, state: ClusterState, classes: Sequence[PodClass]) -> None:
        super().__init__(state, classes)
        self.model = FragmentationModel(classes, state)

    def resolve(self, gain: np.ndarray) -> np.ndarray:
        return fgd_score(gain) if self.resolution is Resolution.SIMULATOR else gain

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement:
        before = self.model.frag[candidates]
        if 0 < pod.gpu_milli < MILLI:  # a share of one GPU
            # Nodes in the same state (model, free CPU, free share per GPU) score the same:
            # score one of each and copy (early in the replay most nodes are still identical).
            keys = np.column_stack(
                [self.model.node_model[candidates], self.state.cpu_free[candidates], self.state.gpu_free[candidates]]
            )
            first, inverse = distinct_rows(keys)
            after = self.model.after_share(candidates[first], pod)[inverse]  # (K, G)
            gain = self.resolve(before[:, None] - after)  # -inf (GPU too full) stays -inf
            best_gpu = np.argmax(gain, axis=1)  # lowest index among a node's equal GPUs
            node = self.pick(gain[np.arange(len(candidates)), best_gpu], candidates, rng)
            return Placement(node=node, gpus=(int(best_gpu[np.flatnonzero(candidates == node)[0]]),))
        after = self.model.after_whole(candidates, pod)  # also a CPU-only pod: it takes no GPU
        node = self.pick(self.resolve(before - after), candidates, rng)
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


def variant(policy: type[_Base], ties: Ties, resolution: Resolution) -> type[_Base]:
    """The same policy with other tie and score-resolution rules (our earlier replay's settings), named
    `<policy>/<resolution>-<ties>-tie`, e.g. `fgd/exact-random-tie`."""
    suffix = f"/{resolution.value}-{ties.value}-tie"
    attrs = {"name": policy.name + suffix, "ties": ties, "resolution": resolution}
    return type(policy.__name__ + suffix.replace("/", "_").replace("-", "_"), (policy,), attrs)


# Means at 100 % arrived GPU demand, Weng et al. ATC'23 (default trace, 10 seeds).
PUBLISHED_UNALLOCATED_PCT: dict[str, float] = {
    "random-fit": 13.70,
    "dot-product": 9.38,
    "gpu-clustering": 8.35,
    "gpu-packing": 8.22,
    "best-fit": 7.14,
    "fgd": 4.77,
}
