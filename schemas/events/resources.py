"""Events about DRA resources: resources.slices, resources.claims."""

from __future__ import annotations

from schemas.dra import AllocatedDevice, DraDevice
from schemas.events.base import Event

# --- resources.slices (compacted, key = ResourceSlice name) -------------------------------


class ResourceSliceEvent(Event, frozen=True, kw_only=True):
    """One node-local ResourceSlice (resource.k8s.io/v1): a driver's devices in one pool of one node."""

    name: str
    node: str
    driver: str
    pool: str
    devices: tuple[DraDevice, ...] = ()
    deleted: bool = False
    observed_at: float = 0.0


# --- resources.claims (compacted, key = ResourceClaim uid) --------------------------------


class AllocatedClaimEvent(Event, frozen=True, kw_only=True):
    """The devices one allocated ResourceClaim holds (resource.k8s.io/v1), whoever allocated it:
    ours and those kube-scheduler allocated for other pods. Deleted or deallocated: `deleted`."""

    uid: str
    namespace: str
    name: str
    node: str = ""  # the one node the allocation's nodeSelector names ("" when it names none)
    devices: tuple[AllocatedDevice, ...] = ()
    deleted: bool = False
    observed_at: float = 0.0
