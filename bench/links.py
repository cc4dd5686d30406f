"""Link scores of device sets, the exhaustive optimum, and the link class of a set.

Pair score = the table HAMi v2.7 and NVIDIA go-gpuallocator both use
(10 cross-socket SYS, 20 NODE, 30 PHB, 40 PXB, 50 PIX, 60 same board, plus 100
per bonded NVLink), applied to the schema's links, so MetaXLink and NeuronLink
lanes count as links too. A set's score is the sum over its pairs. The table
is the engine's own (`nvidia_links`): the yardstick must score exactly what the
engine and the HAMi baseline optimise. An NVLink pair printed without its PCIe
path takes it from the two devices' NUMA nodes (NODE within one, SYS across), as
NVML reports such pairs to HAMi on a live node.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from functools import cache
from itertools import combinations

import numpy as np

from engine.node.vendors.nvidia.links import NVLINK_SCORE, PCIE_SCORE
from schemas.topology import Link, PcieLevel


class PairTable:
    """Symmetric pair scores over device positions 0..n-1 (positions, not device indices)."""

    def __init__(self, indices: Sequence[int], links: Iterable[Link], numa: Sequence[int | None] = ()) -> None:
        """`numa`: each device's NUMA node, in the order of `indices` (empty: unknown)."""
        self.indices = tuple(indices)
        position = {d: i for i, d in enumerate(self.indices)}
        numa_of = dict(zip(self.indices, numa, strict=False))
        n = len(self.indices)
        self.score = np.zeros((n, n), dtype=np.int64)
        self.nvlinks = np.zeros((n, n), dtype=np.int64)
        self.pcie = np.full((n, n), -1, dtype=np.int64)  # PCIE_SCORE value, -1 unknown
        for link in links:
            if link.src not in position or link.dst not in position or link.src == link.dst:
                continue
            a, b = position[link.src], position[link.dst]
            pcie = link.pcie
            numa_a, numa_b = numa_of.get(link.src), numa_of.get(link.dst)
            if pcie is None and link.nvlinks and numa_a is not None and numa_b is not None:
                pcie = PcieLevel.NODE if numa_a == numa_b else PcieLevel.SYS
            value = NVLINK_SCORE * link.nvlinks + (PCIE_SCORE[pcie] if pcie is not None else 0)
            # Both directions are reported; keep the smaller if they disagree (asymmetric = suspect).
            self.score[a, b] = self.score[b, a] = value if self.score[a, b] == 0 else min(self.score[a, b], value)
            self.nvlinks[a, b] = self.nvlinks[b, a] = link.nvlinks
            if pcie is not None:
                self.pcie[a, b] = self.pcie[b, a] = PCIE_SCORE[pcie]

    @property
    def size(self) -> int:
        return len(self.indices)

    def set_score(self, positions: Sequence[int]) -> int:
        p = list(positions)
        return int(self.score[np.ix_(p, p)].sum() // 2)


@cache
def _combos(n: int, k: int) -> np.ndarray:
    return np.array(list(combinations(range(n), k)), dtype=np.int64).reshape(-1, k)


def optimum(table: PairTable, free: Sequence[int], k: int) -> int:
    """The best set score over every k-subset of the free positions (exhaustive)."""
    free = list(free)
    if k > len(free):
        raise ValueError(f"k: {k} devices asked, {len(free)} free")
    if k < 2:
        return 0
    sets = np.array(free, dtype=np.int64)[_combos(len(free), k)]  # (S, k)
    sub = table.score[sets[:, :, None], sets[:, None, :]]  # (S, k, k)
    return int(sub.sum(axis=(1, 2)).max() // 2)


def best_set(table: PairTable, positions: Sequence[int], k: int) -> tuple[int, ...]:
    """The k-subset of `positions` with the highest set score; the first in combination order wins ties
    (() when there are fewer than k positions)."""
    return max(combinations(positions, k), key=table.set_score, default=())


class LinkClass(enum.StrEnum):
    """The weakest path a set's collective traffic crosses."""

    NVLINK_ALL = "nvlink-all-pairs"  # every pair directly linked (NVSwitch, full mesh)
    NVLINK_CONNECTED = "nvlink-connected"  # linked as a graph, some pairs hop through another device
    PCIE_SWITCH = "pcie-switch"  # weakest pair under PCIe switches (PIX/PXB)
    PCIE_HOST = "pcie-host-bridge"  # weakest pair through a host bridge (PHB/NODE)
    CROSS_SOCKET = "cross-socket"  # weakest pair across CPU sockets (SYS)
    SINGLE = "single-device"


def link_class(table: PairTable, positions: Sequence[int]) -> LinkClass:
    p = list(positions)
    if len(p) < 2:
        return LinkClass.SINGLE
    nv = table.nvlinks[np.ix_(p, p)] > 0
    off = ~np.eye(len(p), dtype=bool)
    if nv[off].all():
        return LinkClass.NVLINK_ALL
    # Connected through NVLink alone?
    seen = {0}
    frontier = [0]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(nv[i]):
            if int(j) not in seen:
                seen.add(int(j))
                frontier.append(int(j))
    if len(seen) == len(p):
        return LinkClass.NVLINK_CONNECTED
    pcie = table.pcie[np.ix_(p, p)][off & ~nv]
    weakest = int(pcie.min()) if pcie.size else -1
    if weakest >= PCIE_SCORE[PcieLevel.PXB]:
        return LinkClass.PCIE_SWITCH
    if weakest >= PCIE_SCORE[PcieLevel.NODE]:
        return LinkClass.PCIE_HOST
    return LinkClass.CROSS_SOCKET
