"""What the node policies read of an NVIDIA node (engine/node/policy.py).

Default mode, the vendor's own terms around the policy's:

    score = link + policy term + remainder
    link      = pair-score sum / number of pairs (0 for one GPU)
    remainder = -10 x remainder loss / pair-score sum of the idle GPUs before the pod
    fill      = share of the node's healthy GPUs in use after the pod (max of memory and cores), weighed 20

One PCIe level is 10 and one NVLink 100: packing (at most 20) never outweighs an NVLink.
FGD's measure reads each GPU's free share: the scarcer of free memory and free cores,
none once DEVICE_SPLIT_COUNT pods share it. Mode hami: HAMi's node usage, no own terms.
"""

from __future__ import annotations

from math import comb

from engine.core.model import MILLI, Mode
from engine.node.fragmentation import FreeShare
from engine.node.policy import DIGITS, OwnTerms
from engine.node.vendor import NodeScratch, SetChoice
from engine.node.vendors.nvidia.hami import HAMI_WEIGHT, hami_node_usage
from engine.node.vendors.nvidia.request import DEVICE_SPLIT_COUNT, NvidiaRequest
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor

FILL_WEIGHT = 20.0  # one PCIe level is 10, one NVLink 100: packing never outweighs an NVLink
REMAINDER_WEIGHT = 10.0


class NvidiaMeasures:
    """One NVIDIA node for one request, as the node policies read it."""

    fill_weight = FILL_WEIGHT
    hami_spread_base = 3.0 * HAMI_WEIGHT  # spread reported as 30 - usage, so that higher always wins

    def __init__(self, scratch: NodeScratch, request: NvidiaRequest) -> None:
        self.scratch = scratch
        self.request = request

    def own_terms(self, choice: SetChoice, packs: bool) -> OwnTerms:
        if self.scratch.mode is Mode.HAMI:
            return OwnTerms()
        k = len(choice.assignments)
        link = choice.set_score / comb(k, 2) if k >= 2 else 0.0
        before = choice.parts.get("idle_score_before", 0.0)
        loss = choice.parts.get("remainder_loss", 0.0)
        remainder = -REMAINDER_WEIGHT * (loss / before) + 0.0 if before > 0 else 0.0  # + 0.0: no -0
        return OwnTerms(
            lead=link,
            lead_parts={"link": round(link, DIGITS)},
            tail=remainder,
            tail_parts={"remainder": round(remainder, DIGITS)},
        )

    def fill_after(self, choice: SetChoice) -> float:
        """Mean share of each healthy GPU in use after the placement (max of memory and cores)."""
        scratch, request = self.scratch, self.request
        gpus = [d for d in scratch.devices.values() if d.vendor is Vendor.NVIDIA and d.healthy]
        if not gpus:
            return 0.0
        chosen = {a.index: a for a in choice.assignments}
        total = 0.0
        for d in gpus:
            load = scratch.loads[d.index]
            memory, cores = load.memory_used_mib, load.cores_used
            if d.index in chosen:
                memory += request.memory_for(d)
                cores += 100 if request.whole else request.cores
            total += min(1.0, max(memory / d.memory_mib if d.memory_mib else 0.0, cores / d.cores if d.cores else 0.0))
        return total / len(gpus)

    def hami_usage(self) -> float:
        return hami_node_usage(self.scratch)

    def free_shares(self, taken: tuple[DeviceAssignment, ...]) -> list[FreeShare]:
        """Each GPU's free share once the pod holds the GPUs `taken` (none: as it is now)."""
        scratch, request = self.scratch, self.request
        held = {a.index for a in taken}
        shares: list[FreeShare] = []
        for d in scratch.devices.values():
            if d.vendor is not Vendor.NVIDIA:
                continue
            load = scratch.loads[d.index]
            memory, cores, pods = load.memory_used_mib, load.cores_used, load.pods
            if d.index in held:
                memory += request.memory_for(d)
                cores += 100 if request.whole else request.cores
                pods += 1
            shares.append(_free_share(d, memory, cores, pods))
        return shares

    def taken_milli(self, taken: tuple[DeviceAssignment, ...]) -> int:
        return sum(_share_milli(self.request, self.scratch.devices[a.index]) for a in taken)

    def busy(self) -> bool:
        return any(
            not self.scratch.loads[d.index].idle for d in self.scratch.devices.values() if d.vendor is Vendor.NVIDIA
        )


def _free_share(device: Device, memory_used: int, cores_used: int, pods: int) -> FreeShare:
    """A GPU's free share in milli: the scarcer of memory and cores; none once the split count is reached."""
    if not device.healthy or pods >= DEVICE_SPLIT_COUNT:
        return FreeShare(milli=0, idle=False, model=device.model)
    memory = max(0, device.memory_mib - memory_used) * MILLI // device.memory_mib if device.memory_mib else 0
    cores = max(0, device.cores - cores_used) * MILLI // device.cores if device.cores else 0
    return FreeShare(milli=min(memory, cores), idle=pods == 0, model=device.model)


def _share_milli(request: NvidiaRequest, device: Device) -> int:
    """Thousandths of `device` the pod takes: the larger of its memory and core shares."""
    if request.whole:
        return MILLI
    memory = request.memory_for(device) * MILLI // device.memory_mib if device.memory_mib else 0
    return min(MILLI, max(memory, request.cores * MILLI // 100))
