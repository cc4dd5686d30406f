"""DRA's structured-parameters allocation (resource.k8s.io/v1) on one node: pools, CEL, the search.

programs = CelPrograms(memo.table(1024))          # the caller owns the compiled selectors
allocate(node, claims, AllocationInput(...), programs)  # one AllocationResult per claim, or None
"""

from fractions import Fraction

from engine.node.dra.allocator import MAX_STEPS, AllocationInput, allocate
from engine.node.dra.capacity import amount, consumed_by, qualified
from engine.node.dra.cel_programs import CelPrograms, SelectorError
from engine.node.dra.model import AllocationResult, DeviceClass, DeviceId, NodeView, ResourceClaim, ResourceSlice
from engine.node.dra.requests import AllocationError, Features

__all__ = [
    "MAX_STEPS",
    "AllocationError",
    "AllocationInput",
    "AllocationResult",
    "CelPrograms",
    "DeviceClass",
    "DeviceId",
    "Features",
    "NodeView",
    "ResourceClaim",
    "ResourceSlice",
    "SelectorError",
    "allocate",
    "allocated_devices",
    "consumed_by",
    "consumed_capacity",
]


def allocated_devices(claims: list[ResourceClaim]) -> frozenset[DeviceId]:
    """The devices that allocated claims hold wholly: not by adminAccess, nor by a share (shareID)."""
    return frozenset(
        (r.driver, r.pool, r.device)
        for claim in claims
        if claim.status.allocation is not None
        for r in claim.status.allocation.devices.results
        if not r.admin_access and r.share_id is None
    )


def consumed_capacity(claims: list[ResourceClaim]) -> dict[DeviceId, dict[str, Fraction]]:
    """What the shares that allocated claims hold consume, by device and fully qualified capacity name.

    Raises AllocationError for a consumedCapacity that is not a quantity."""
    out: dict[DeviceId, dict[str, Fraction]] = {}
    for claim in claims:
        if claim.status.allocation is None:
            continue
        for r in claim.status.allocation.devices.results:
            if r.share_id is None:
                continue
            held = out.setdefault((r.driver, r.pool, r.device), {})
            for name, text in r.consumed_capacity.items():
                key = qualified(name, r.driver)
                held[key] = held.get(key, Fraction(0)) + amount(text, f"claim {claim.metadata.name}: {name}")
    return out
