"""DRA's structured-parameters allocation (resource.k8s.io/v1) on one node: pools, CEL, the search.

programs = CelPrograms(memo.table(1024))          # the caller owns the compiled selectors
allocate(node, claims, AllocationInput(...), programs)  # one AllocationResult per claim, or None
"""

from engine.node.dra.allocator import MAX_STEPS, AllocationInput, allocate
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
]


def allocated_devices(claims: list[ResourceClaim]) -> frozenset[DeviceId]:
    """The devices that allocated claims hold; an adminAccess result does not take its device."""
    return frozenset(
        (r.driver, r.pool, r.device)
        for claim in claims
        if claim.status.allocation is not None
        for r in claim.status.allocation.devices.results
        if not r.admin_access
    )
