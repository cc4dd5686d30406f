"""topoplace-fgd+: FGD's integer fragmentation score with deliberate tie rules and link-aware devices.

A bench prototype (not the engine's) of a policy for the simulator's protocol:

- node level: FGD's integer score (`fgd_score`): the fragmentation change binned coarsely;
- inside one level, a GPU pod goes to a node already in use before an idle one (idle nodes stay
  whole for the multi-GPU pods FGD's typical shapes barely see);
- then by CPU spare: free CPU after placing minus what the node's free GPUs would need at its
  own CPU-per-GPU ratio. CPU-only and CPU-heavy pods go to the node with the most spare, GPU
  pods light on CPU to the node with the least, so GPUs are not left without CPU;
- remaining ties: the fixed node order (the cluster's node ranks);
- devices: a shared pod takes, among the GPUs with its node's top score, one in the NVLink group
  (quad of an 8-GPU node) that is already broken, so whole quads and 8-sets stay intact; a
  multi-GPU pod takes the link-optimal set among the free GPUs (the engine's pair table), and
  among equally good sets the one in the most broken groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from bench.cluster import MILLI, ClusterState, Placement
from bench.fragmentation import PodClass
from bench.trace import PodRow
from bench.trace_links import node_pair_table
from bench.trace_policies import MAX_SPEC_CPU, Fgd, distinct_rows, fgd_score

GROUP_SIZE = 4  # GPUs per NVLink quad / PCIe half of an 8-GPU node; smaller nodes are one group
SECONDARY_SPAN = 0.98  # the in-level key lives in [0, 0.98): it never lifts a node to the next level


class FgdPlus(Fgd):
    name = "topoplace-fgd+"

    def __init__(self, state: ClusterState, classes: Sequence[PodClass]) -> None:
        super().__init__(state, classes)
        self.cpu_per_gpu = state.cpu_cap / np.maximum(state.gpu_count, 1)
        self.heavy_ratio = float(np.median(self.cpu_per_gpu))  # CPU per GPU above this = a CPU-heavy pod

    def cpu_heavy(self, pod: PodRow) -> bool:
        return pod.num_gpu == 0 or pod.cpu_milli * MILLI / pod.gpu_milli_total > self.heavy_ratio

    def cpu_spare(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        """Free CPU after placing minus the CPU the node's free GPUs would need at its own CPU-per-GPU
        ratio, over the simulator's CPU maximum (clipped to [-1, 1])."""
        cpu_after = self.state.cpu_free[candidates] - pod.cpu_milli
        gpu_after = self.gpu_left(candidates) - pod.gpu_milli_total
        spare: np.ndarray = np.clip(
            (cpu_after - gpu_after / MILLI * self.cpu_per_gpu[candidates]) / MAX_SPEC_CPU, -1, 1
        )
        return spare

    def in_level(self, pod: PodRow, candidates: np.ndarray) -> np.ndarray:
        """The in-level key in [0, SECONDARY_SPAN): for a GPU pod a used node before an idle one; then more
        CPU spare for a CPU-heavy pod, less for a GPU pod light on CPU (it leaves the CPU-rich nodes to the
        pods that need them)."""
        spare = (self.cpu_spare(pod, candidates) + 1.0) / 2.0  # in [0, 1]
        by_cpu = spare if self.cpu_heavy(pod) else 1.0 - spare
        if pod.num_gpu == 0:
            key: np.ndarray = by_cpu * SECONDARY_SPAN
            return key
        # Upper half of the span for a node already in use, the CPU rule inside each half.
        idle = (self.state.gpu_free[candidates] == MILLI).sum(axis=1) == self.state.gpu_count[candidates]
        key = (np.where(idle, 0.0, 1.0) + by_cpu) / 2.0 * SECONDARY_SPAN
        return key

    def group_free(self, node: int) -> np.ndarray:
        """For each GPU slot: how many fully free GPUs its group holds (fewer = more broken)."""
        free = self.state.gpu_free[node] == MILLI
        count = int(self.state.gpu_count[node])
        size = GROUP_SIZE if count > GROUP_SIZE else max(count, 1)
        groups = np.arange(len(free)) // size
        per_group = np.bincount(groups, weights=free, minlength=groups.max() + 1)
        out: np.ndarray = per_group[groups]
        return out

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement:
        before = self.model.frag[candidates]
        if 0 < pod.gpu_milli < MILLI:
            keys = np.column_stack(
                [self.model.node_model[candidates], self.state.cpu_free[candidates], self.state.gpu_free[candidates]]
            )
            first, inverse = distinct_rows(keys)
            after = self.model.after_share(candidates[first], pod)[inverse]
            level = fgd_score(before[:, None] - after)  # (K, G)
            top = level.max(axis=1)
            node = self.pick(top + self.in_level(pod, candidates), candidates, rng)
            row = level[np.flatnonzero(candidates == node)[0]]
            return Placement(node=node, gpus=(self.share_gpu(node, row),))
        after = self.model.after_whole(candidates, pod)
        node = self.pick(fgd_score(before - after) + self.in_level(pod, candidates), candidates, rng)
        return Placement(node=node, gpus=self.whole_gpus(node, pod.num_gpu))

    def share_gpu(self, node: int, level: np.ndarray) -> int:
        """Among the GPUs with the top score: the one whose group is most broken, then the lowest index."""
        best = np.flatnonzero(level >= level.max())
        broken = self.group_free(node)[best]
        return int(best[np.argmin(broken)])

    def whole_gpus(self, node: int, count: int) -> tuple[int, ...]:
        if count == 0:
            return ()
        free = [int(g) for g in np.flatnonzero(self.state.gpu_free[node] == MILLI)]
        group_free = self.group_free(node)
        if count == 1:
            return (min(free, key=lambda g: (group_free[g], g)),)
        table = node_pair_table(self.state, node)
        # The link-optimal sets, then the one whose GPUs sit in the most broken groups.
        sets = list(combinations(free, count))
        scores = [table.set_score(s) for s in sets]
        top = max(scores)
        optimal = [s for s, v in zip(sets, scores, strict=True) if v == top]
        return min(optimal, key=lambda s: (sum(group_free[g] for g in s), s))
