"""What the node policies read of a MetaX node (engine/node/policy.py).

Default mode, the vendor's own term first (for an exclusive sGPU request
10 x allocated - loss of its MetaXLink zones, unless the pod sets
metax-tech.com/sgpu-topology-aware=false; for an online pod HAMi's online-card
penalty; for whole cards the node annotation's preference, the losses for a
packing policy, the scores for a spreading one), then the policy's term, whose
fill (share of each healthy card in use after the pod, memory or compute) weighs
1: it only breaks ties between equal topology terms.

Mode hami: HAMi's node usage (cores and memory) and HAMi's vendor term after it
(10000 x the sGPU topology or online score, only when the pod switches
topology-aware on; whole cards: 2000 - loss / score of the policy's annotation).

FGD's measure reads each card's free share like an NVIDIA GPU's: the scarcer of free
memory and free compute, in thousandths of the card (sGPU shares are memory and
vcore percent); a whole-card class takes only idle cards.
"""

from __future__ import annotations

from engine.core.model import MILLI, Mode
from engine.node.fragmentation import FreeShare
from engine.node.policy import OwnTerms
from engine.node.vendor import NodeScratch, SetChoice
from engine.node.vendors.metax import gpu as metax_gpu
from engine.node.vendors.metax.qos import online_card_score
from engine.node.vendors.metax.request import MetaxKind, MetaxRequest
from engine.node.vendors.metax.zones import zone_node_score
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor

HAMI_VENDOR_WEIGHT = 10000  # HAMi's sGPU ScoreNode weight
HAMI_WEIGHT = 10  # HAMi's util.Weight in its usage scores


def idle_cards(scratch: NodeScratch) -> tuple[Device, ...]:
    return tuple(scratch.devices[i] for i in scratch.idle_indices(Vendor.METAX))


class MetaxMeasures:
    """One MetaX node for one request, as the node policies read it."""

    fill_weight = 1.0  # the fill only breaks ties between equal topology terms
    hami_spread_base = 0.0  # HAMi's spread reported as -usage

    def __init__(self, scratch: NodeScratch, request: MetaxRequest) -> None:
        self.scratch = scratch
        self.request = request

    def _cards(self) -> list[Device]:
        return [d for d in self.scratch.devices.values() if d.vendor is Vendor.METAX]

    def own_terms(self, choice: SetChoice, packs: bool) -> OwnTerms:
        chosen = tuple(self.scratch.devices[i] for i in choice.devices)
        hami = self.scratch.mode is Mode.HAMI
        term, parts = topology_term(self.scratch, self.request, chosen, hami=hami, packs=packs)
        if not hami:
            return OwnTerms(lead=term, lead_parts=parts)
        weight = 1.0 if self.request.kind is MetaxKind.GPU else float(HAMI_VENDOR_WEIGHT)
        return OwnTerms(lead_parts=parts, tail=weight * term)

    def fill_after(self, choice: SetChoice) -> float:
        """Mean share of each healthy card in use after the placement (max of memory and compute)."""
        cards = [d for d in self._cards() if d.healthy]
        if not cards:
            return 0.0
        chosen = {a.index for a in choice.assignments}
        total = 0.0
        for card in cards:
            memory, cores, _ = self._used_after(card, card.index in chosen)
            share = max(memory / card.memory_mib if card.memory_mib else 0.0, cores / card.cores if card.cores else 0.0)
            total += min(1.0, share)
        return total / len(cards)

    def hami_usage(self) -> float:
        cards = self._cards()
        cores = sum(d.cores for d in cards)
        memory = sum(d.memory_mib for d in cards)
        used_cores = sum(self.scratch.loads[d.index].cores_used for d in cards)
        used_memory = sum(self.scratch.loads[d.index].memory_used_mib for d in cards)
        return HAMI_WEIGHT * ((used_cores / cores if cores else 0.0) + (used_memory / memory if memory else 0.0))

    def free_shares(self, taken: tuple[DeviceAssignment, ...]) -> list[FreeShare]:
        """Each card's free share once the pod holds the cards `taken`: the scarcer of memory and compute."""
        held = {a.index for a in taken}
        shares: list[FreeShare] = []
        for card in self._cards():
            memory, cores, pods = self._used_after(card, card.index in held)
            if not card.healthy:
                shares.append(FreeShare(milli=0, idle=False, model=card.model))
                continue
            free_memory = max(0, card.memory_mib - memory) * MILLI // card.memory_mib if card.memory_mib else 0
            free_cores = max(0, card.cores - cores) * MILLI // card.cores if card.cores else 0
            shares.append(FreeShare(milli=min(free_memory, free_cores), idle=pods == 0, model=card.model))
        return shares

    def taken_milli(self, taken: tuple[DeviceAssignment, ...]) -> int:
        total = 0
        for a in taken:
            card = self.scratch.devices[a.index]
            memory, cores = self._taken(card)
            by_memory = memory * MILLI // card.memory_mib if card.memory_mib else 0
            by_cores = cores * MILLI // card.cores if card.cores else 0
            total += min(MILLI, max(by_memory, by_cores))
        return total

    def busy(self) -> bool:
        return any(not self.scratch.loads[d.index].idle for d in self._cards())

    def _taken(self, card: Device) -> tuple[int, int]:
        """Memory and compute the pod takes on `card`: a whole card all of it; an online pod no compute."""
        request = self.request
        if request.kind is MetaxKind.GPU:
            return card.memory_mib, 100  # percent of the card's compute, as HAMi counts a whole card
        return request.memory_for(card.memory_mib), 0 if request.online else request.cores

    def _used_after(self, card: Device, holds: bool) -> tuple[int, int, int]:
        """Memory, compute and pods on `card`, with the pod when it `holds` the card."""
        load = self.scratch.loads[card.index]
        if not holds:
            return load.memory_used_mib, load.cores_used, load.pods
        memory, cores = self._taken(card)
        return load.memory_used_mib + memory, load.cores_used + cores, load.pods + 1


def _topology_enabled(request: MetaxRequest, hami: bool) -> bool:
    if request.kind is not MetaxKind.SGPU or not request.exclusive:
        return False
    if request.topology_aware is not None:
        return request.topology_aware
    return not hami  # HAMi's sgpuTopologyAware config defaults to off; ours is on


def topology_term(
    scratch: NodeScratch, request: MetaxRequest, chosen: tuple[Device, ...], *, hami: bool, packs: bool
) -> tuple[float, dict[str, float]]:
    """The vendor term on the higher-is-better scale, and its named parts (`packs`: which of the whole-card
    annotations a packing or a spreading policy reads)."""
    if request.kind is MetaxKind.GPU:
        size = request.count
        direction = metax_gpu.BINPACK if packs else metax_gpu.SPREAD
        pref = (
            metax_gpu.hami_preference(scratch.node.annotations, size, direction)
            if hami
            else metax_gpu.preference(scratch.node.annotations, size, direction)
        )
        if pref.warning:
            scratch.warn(pref.warning)
        return pref.value, {"topology_preference": pref.value}
    if request.online:
        penalty = float(sum(online_card_score(scratch.loads[d.index].app_classes) for d in chosen))
        return penalty, {"online_penalty": penalty}
    if not _topology_enabled(request, hami):
        return 0.0, {}
    zones = zone_node_score(chosen, idle_cards(scratch))
    return float(zones.node_score), {
        "topology": float(zones.node_score),
        "allocated_score": float(zones.allocated),
        "loss": float(zones.loss),
    }
