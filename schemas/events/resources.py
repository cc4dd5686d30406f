"""Events about DRA resources: resources.slices, resources.claims, resources.classes, resources.taintrules."""

from __future__ import annotations

from schemas.dra import AllocatedDevice, DraDevice
from schemas.dra_objects import AllocationResult, DeviceClassSpec, DeviceTaintRuleSpec, ResourceSliceSpec
from schemas.events.base import Event

# --- resources.slices (compacted, key = ResourceSlice name) -------------------------------


class ResourceSliceEvent(Event, frozen=True, kw_only=True):
    """One node-local ResourceSlice (resource.k8s.io/v1): a driver's devices in one pool of one node."""

    name: str
    node: str
    driver: str
    pool: str
    devices: tuple[DraDevice, ...] = ()
    # the slice whole, as the structured allocator reads it: taints, counters, pool generation,
    # node selection (None: from a watcher that did not send it)
    spec: ResourceSliceSpec | None = None
    deleted: bool = False
    observed_at: float = 0.0


# --- resources.classes (compacted, key = DeviceClass name) ---------------------------------


class DeviceClassEvent(Event, frozen=True, kw_only=True):
    """One DeviceClass (resource.k8s.io/v1): the selectors every request of the class adds, and the
    config an allocation copies (source FromClass)."""

    name: str
    spec: DeviceClassSpec = DeviceClassSpec()
    deleted: bool = False
    observed_at: float = 0.0


# --- resources.taintrules (compacted, key = DeviceTaintRule name) ---------------------------


class DeviceTaintRuleEvent(Event, frozen=True, kw_only=True):
    """One DeviceTaintRule (resource.k8s.io): a taint an administrator puts on the devices its
    selector names, added to the slices' own."""

    name: str
    spec: DeviceTaintRuleSpec | None = None  # None: only when deleted
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
    # status.allocation whole (shares, consumed capacity, config); None: from an older watcher
    allocation: AllocationResult | None = None
    deleted: bool = False
    observed_at: float = 0.0
