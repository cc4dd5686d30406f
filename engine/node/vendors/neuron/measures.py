"""What the node policies read of a Neuron node (engine/node/policy.py).

Default mode: the policy's term, then the vendor's own: minus 10 x damage, how much the
choice shrinks the largest legal group of free devices (longest free run on Inferentia,
largest free aligned block on Trainium) as a share of the node's devices. The fill is
the node's share of NeuronCores in use after the pod, weighed 10. Mode hami: HAMi's
usage of NeuronCores only (its Neuron ScoreNode is 0).

FGD's measure reads each device's free share as its free NeuronCores, in thousandths of
the device (a 2-core device with one core taken has 500 left); a whole-device class takes
only idle devices. It counts devices, not where they sit: the search keeps legal groups
(runs, aligned blocks) whole.
"""

from __future__ import annotations

from engine.core.model import MILLI, Mode
from engine.node.fragmentation import FreeShare
from engine.node.policy import DIGITS, OwnTerms
from engine.node.vendor import NodeScratch, SetChoice
from engine.node.vendors.neuron.request import NeuronRequest
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor

HAMI_WEIGHT = 10
FILL_WEIGHT = 10.0
DAMAGE_WEIGHT = 10.0


class NeuronMeasures:
    """One Neuron node for one request, as the node policies read it."""

    fill_weight = FILL_WEIGHT
    hami_spread_base = 0.0  # HAMi's spread reported as -usage

    def __init__(self, scratch: NodeScratch, request: NeuronRequest) -> None:
        self.scratch = scratch
        self.request = request

    def _devices(self) -> list[Device]:
        return [d for d in self.scratch.devices.values() if d.vendor is Vendor.NEURON]

    def own_terms(self, choice: SetChoice, packs: bool) -> OwnTerms:
        if self.scratch.mode is Mode.HAMI:
            return OwnTerms()
        devices = self._devices()
        before = choice.parts.get("largest_free_group_before", 0.0)
        after = choice.parts.get("largest_free_group_after", 0.0)
        damage = DAMAGE_WEIGHT * (before - after) / len(devices) if devices else 0.0
        return OwnTerms(tail=-damage, tail_parts={"remainder_damage": round(-damage, DIGITS)})

    def fill_after(self, choice: SetChoice) -> float:
        devices = self._devices()
        total = sum(d.cores for d in devices)
        used = sum(self.scratch.loads[d.index].cores_used for d in devices)
        taken = sum(a.cores for a in choice.assignments)
        return (used + taken) / total if total else 0.0

    def hami_usage(self) -> float:
        devices = self._devices()
        total = sum(d.cores for d in devices)
        used = sum(self.scratch.loads[d.index].cores_used for d in devices)
        return HAMI_WEIGHT * (used / total if total else 0.0)

    def free_shares(self, taken: tuple[DeviceAssignment, ...]) -> list[FreeShare]:
        """Each device's free NeuronCores, in thousandths of it, once the pod holds `taken`."""
        held: dict[int, int] = {}
        for a in taken:
            held[a.index] = held.get(a.index, 0) + a.cores
        shares: list[FreeShare] = []
        for d in self._devices():
            load = self.scratch.loads[d.index]
            if not d.healthy or d.cores <= 0:
                shares.append(FreeShare(milli=0, idle=False, model=d.model))
                continue
            free = max(0, d.cores - load.cores_used - held.get(d.index, 0))
            idle = load.pods == 0 and d.index not in held
            shares.append(FreeShare(milli=free * MILLI // d.cores, idle=idle, model=d.model))
        return shares

    def taken_milli(self, taken: tuple[DeviceAssignment, ...]) -> int:
        devices = self.scratch.devices
        return sum(min(MILLI, a.cores * MILLI // devices[a.index].cores) for a in taken if devices[a.index].cores > 0)

    def busy(self) -> bool:
        return any(not self.scratch.loads[d.index].idle for d in self._devices())
