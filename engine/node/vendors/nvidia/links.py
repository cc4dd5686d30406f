"""NVIDIA pair scores: how well two GPUs talk, as HAMi's device plugin scores it.

A pair's score is the sum over its links: the PCIe path (SYS 10, NODE 20,
PHB 30, PXB 40, PIX 50, SAME_BOARD 60) plus 100 per NVLink (at most 18).
Two GPUs that both reach the NVSwitch fabric and have no direct NVLink get
min(their switch-link counts) NVLinks. A pair whose two directions disagree
scores 0 and is reported as asymmetric.

An NVLink pair whose PCIe path is not known (`nvidia-smi topo -m` prints only
`NV#` for it) takes it from the GPUs' NUMA nodes: SYS across NUMA nodes, NODE
within one, as NVML's common-ancestor query reports such pairs. So a print, a
fixture and the live NVML reading of one machine score alike, and of equally
linked GPUs the search keeps a set on one CPU socket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import msgspec

from schemas.topology import Device, Link, PcieLevel

PCIE_SCORE: Mapping[PcieLevel, int] = MappingProxyType(
    {
        PcieLevel.SYS: 10,
        PcieLevel.NODE: 20,
        PcieLevel.PHB: 30,
        PcieLevel.PXB: 40,
        PcieLevel.PIX: 50,
        PcieLevel.SAME_BOARD: 60,
    }
)
NVLINK_SCORE = 100
MAX_NVLINKS = 18  # NVML's link-type table ends at 18 (H100 / B200)


class PairLink(msgspec.Struct, frozen=True):
    """One direction of a pair as the scorer sees it."""

    nvlinks: int
    pcie: PcieLevel | None


class PairScore(msgspec.Struct, frozen=True):
    score: int
    nvlinks: int = 0
    pcie: PcieLevel | None = None
    asymmetric: bool = False
    note: str = ""  # set when data was clamped or missing


def _direction(link: Link | None, a: Device, b: Device) -> PairLink | None:
    nvlinks = link.nvlinks if link is not None else 0
    pcie = link.pcie if link is not None else None
    if nvlinks == 0 and a.nvswitch_links > 0 and b.nvswitch_links > 0:
        nvlinks = min(a.nvswitch_links, b.nvswitch_links)  # through the switch fabric
    if link is None and nvlinks == 0:
        return None
    if pcie is None and nvlinks > 0:
        pcie = _pcie_from_numa(a, b)
    return PairLink(nvlinks, pcie)


def _pcie_from_numa(a: Device, b: Device) -> PcieLevel | None:
    """The PCIe level two GPUs' NUMA nodes imply (None: either is unknown)."""
    if a.numa_node is None or b.numa_node is None:
        return None
    return PcieLevel.NODE if a.numa_node == b.numa_node else PcieLevel.SYS


def pair_score(a: Device, b: Device, links: Mapping[tuple[int, int], Link]) -> PairScore:
    forward = _direction(links.get((a.index, b.index)), a, b)
    backward = _direction(links.get((b.index, a.index)), b, a)
    if forward is not None and backward is not None and forward != backward:
        return PairScore(0, asymmetric=True, note=f"asymmetric link {a.index}<->{b.index}")
    seen = forward or backward  # a link reported one way only is taken as symmetric
    if seen is None:
        return PairScore(0)
    note = ""
    nvlinks = seen.nvlinks
    if nvlinks > MAX_NVLINKS:
        note = f"{nvlinks} NVLinks between {a.index} and {b.index}, scored as {MAX_NVLINKS}"
        nvlinks = MAX_NVLINKS
    score = NVLINK_SCORE * nvlinks + (PCIE_SCORE[seen.pcie] if seen.pcie is not None else 0)
    return PairScore(score, nvlinks=nvlinks, pcie=seen.pcie, note=note)


class PairTable(msgspec.Struct, frozen=True):
    """Pair scores of some devices, by position in `indices`."""

    indices: tuple[int, ...]
    scores: tuple[tuple[int, ...], ...]
    notes: tuple[str, ...] = ()

    def position(self, index: int) -> int:
        return self.indices.index(index)

    def score(self, a: int, b: int) -> int:
        return self.scores[self.position(a)][self.position(b)]

    def set_score(self, members: Sequence[int]) -> int:
        pos = [self.position(i) for i in members]
        return sum(self.scores[p][q] for x, p in enumerate(pos) for q in pos[x + 1 :])


def pair_table(devices: Sequence[Device], links: Mapping[tuple[int, int], Link]) -> PairTable:
    """Scores of every pair of `devices`, with the notes (asymmetric, clamped) met on the way.

    A pair's score depends only on its two directions' link kinds and the two GPUs' switch links and NUMA
    nodes, so each kind is scored once (a 72-GPU NVSwitch domain has three kinds in 2,556 pairs)."""
    n = len(devices)
    rows = [[0] * n for _ in range(n)]
    notes: list[str] = []
    kinds: dict[tuple[object, ...], int] = {}
    shapes = [(d.nvswitch_links, d.numa_node) for d in devices]
    get = links.get
    for i in range(n):
        a = devices[i]
        row = rows[i]
        for j in range(i + 1, n):
            b = devices[j]
            forward = get((a.index, b.index))
            backward = get((b.index, a.index))
            kind = (
                (forward.nvlinks, forward.pcie) if forward is not None else None,
                (backward.nvlinks, backward.pcie) if backward is not None else None,
                shapes[i],
                shapes[j],
            )
            score = kinds.get(kind)
            if score is None:
                pair = pair_score(a, b, links)
                score = pair.score
                if pair.note:
                    notes.append(pair.note)  # names the pair: such kinds are scored each time
                else:
                    kinds[kind] = score
            row[j] = rows[j][i] = score
    return PairTable(
        indices=tuple(d.index for d in devices),
        scores=tuple(tuple(r) for r in rows),
        notes=tuple(notes),
    )


def cut(table: PairTable, chosen: list[Device], idle: set[int]) -> int:
    """The idle link score a set breaks: pair scores between its idle GPUs and the idle GPUs left behind."""
    members = {d.index for d in chosen}
    return sum(table.score(a, b) for a in sorted(members & idle) for b in sorted(idle - members))
