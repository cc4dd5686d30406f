"""Expected device fragmentation of one node against the cluster's workload (FGD).

After Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
with Fragmentation Gradient Descent" (USENIX ATC 2023), section 3, on device
shares only (the engine's snapshot holds no CPU or memory of the node):

  F(node) = sum over classes c of w_c * frag_c(node) / sum of w_c, where
  frag_c = every free milli of the node, when fewer than c.gpus of its devices can
           take c's share (model not accepted, too little free, or not idle for a
           whole-device class): the class cannot run there at all;
         = the free milli of each device c cannot use, otherwise.

A device's free share is in thousandths of the device (`MILLI` = all of it).
The `fragmentation` node policy prefers the node whose F grows least.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from services.placer.engine.model import MILLI, WorkloadClass

DIGITS = 6  # figures are rounded so that float noise never reorders equal answers


class FreeShare(msgspec.Struct, frozen=True, kw_only=True):
    """What one device has left, as a vendor reports it to the measure."""

    milli: int  # free thousandths of the device (0..MILLI)
    idle: bool  # no pod on it: only an idle device takes a whole-device class
    model: str = ""


def accepts(workload_class: WorkloadClass, model: str) -> bool:
    if not workload_class.models:
        return True
    upper = model.upper()
    return any(m.upper() in upper for m in workload_class.models)


def usable_by(workload_class: WorkloadClass, device: FreeShare) -> bool:
    if not accepts(workload_class, device.model):
        return False
    if workload_class.milli >= MILLI:
        return device.idle and device.milli >= MILLI
    return device.milli >= workload_class.milli


def class_fragment(devices: Sequence[FreeShare], workload_class: WorkloadClass) -> int:
    """Free milli of the node that a pod of this class cannot use."""
    usable = [usable_by(workload_class, d) for d in devices]
    if sum(usable) < workload_class.gpus:
        return sum(d.milli for d in devices)
    return sum(d.milli for d, ok in zip(devices, usable, strict=True) if not ok)


def fragmentation(devices: Sequence[FreeShare], workload: Sequence[WorkloadClass]) -> float:
    """F(node): the expected free milli the next pod of the workload cannot use; 0 for no workload."""
    total_weight = sum(c.weight for c in workload)
    if total_weight <= 0:
        return 0.0
    value = sum(c.weight * class_fragment(devices, c) for c in workload) / total_weight
    return round(value, DIGITS)
