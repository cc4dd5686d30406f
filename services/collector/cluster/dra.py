"""DRA objects (resource.k8s.io/v1) -> topoplace records: pure functions, no I/O.

- a node-local ResourceSlice -> ResourceSliceEvent (its devices with their attributes,
  names qualified with the driver as the API defines, and the uuid that joins the node
  agent's topology);
- a pod's spec.resourceClaims -> PodClaim references (the claim's name: given directly, or
  from pod.status.resourceClaimStatuses for a template), filled in from the ResourceClaim.
"""

from __future__ import annotations

from typing import Any

import msgspec

from schemas import topics
from schemas.dra import (
    AllocatedDevice,
    AttributeValue,
    ClaimConstraint,
    ClaimRequest,
    ClaimSelector,
    DraDevice,
    PodClaim,
)
from schemas.events import AllocatedClaimEvent, ResourceSliceEvent
from services.collector.cluster.objects import ObjectMeta
from services.collector.cluster.trackers import KeyedTracker, Publication
from services.collector.cluster.translate import Problem

UUID_ATTRIBUTES = ("uuid",)  # NVIDIA's driver publishes `uuid`, qualified as gpu.nvidia.com/uuid


class SliceDevice(msgspec.Struct, kw_only=True):
    name: str = ""
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, Any]] = {}


class SlicePool(msgspec.Struct, kw_only=True):
    name: str = ""


class ResourceSliceSpec(msgspec.Struct, kw_only=True, rename="camel"):
    driver: str = ""
    pool: SlicePool = msgspec.field(default_factory=SlicePool)
    node_name: str | None = None
    devices: list[SliceDevice] = []


class ResourceSlice(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


class ExactRequest(msgspec.Struct, kw_only=True, rename="camel"):
    device_class_name: str = ""
    count: int = 1
    allocation_mode: str = "ExactCount"
    selectors: list[dict[str, Any]] = []


class DeviceRequestSpec(msgspec.Struct, kw_only=True):
    name: str = ""
    exactly: ExactRequest | None = None
    firstAvailable: list[Any] = []  # noqa: N815  # the API's field name


class DeviceConstraintSpec(msgspec.Struct, kw_only=True, rename="camel"):
    requests: list[str] = []
    match_attribute: str | None = None


class DeviceClaimSpec(msgspec.Struct, kw_only=True):
    requests: list[DeviceRequestSpec] = []
    constraints: list[DeviceConstraintSpec] = []


class ResourceClaimSpec(msgspec.Struct, kw_only=True):
    devices: DeviceClaimSpec = msgspec.field(default_factory=DeviceClaimSpec)


class AllocationResult(msgspec.Struct, kw_only=True, rename="camel"):
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None


class AllocatedDevices(msgspec.Struct, kw_only=True):
    results: list[AllocationResult] = []


class NodeSelectorRequirement(msgspec.Struct, kw_only=True):
    key: str = ""
    operator: str = ""
    values: list[str] = []


class NodeSelectorTerm(msgspec.Struct, kw_only=True, rename="camel"):
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(msgspec.Struct, kw_only=True, rename="camel"):
    node_selector_terms: list[NodeSelectorTerm] = []


class Allocation(msgspec.Struct, kw_only=True, rename="camel"):
    devices: AllocatedDevices = msgspec.field(default_factory=AllocatedDevices)
    node_selector: NodeSelector | None = None


class ResourceClaimStatus(msgspec.Struct, kw_only=True):
    allocation: Allocation | None = None


class ResourceClaim(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


# --- slices -----------------------------------------------------------------------------------


def qualified(driver: str, name: str) -> str:
    """An attribute name as CEL sees it: unqualified names belong to the driver's domain."""
    return name if "/" in name else f"{driver}/{name}"


def _attribute_value(value: dict[str, Any]) -> AttributeValue | None:
    for kind in ("string", "int", "bool", "version"):
        if kind in value and isinstance(value[kind], (str, int, bool)):
            result: AttributeValue = value[kind]
            return result
    return None


def slice_event(obj: ResourceSlice, now: float) -> tuple[ResourceSliceEvent, list[Problem]]:
    spec, problems = obj.spec, []
    devices = []
    for device in spec.devices:
        attributes: dict[str, AttributeValue] = {}
        for name, value in device.attributes.items():
            parsed = _attribute_value(value)
            if parsed is None:
                problems.append(
                    Problem(
                        object=obj.metadata.name,
                        field=f"spec.devices[{device.name}].attributes[{name}]",
                        reason="no string, int, bool or version value",
                    )
                )
                continue
            attributes[qualified(spec.driver, name)] = parsed
        uuid = next(
            (str(v) for k, v in attributes.items() if k.rsplit("/", 1)[-1] in UUID_ATTRIBUTES and isinstance(v, str)),
            "",
        )
        capacity = {n: str(v.get("value", "")) for n, v in device.capacity.items()}
        devices.append(DraDevice(name=device.name, uuid=uuid, attributes=attributes, capacity=capacity))
    event = ResourceSliceEvent(
        name=obj.metadata.name,
        node=spec.node_name or "",
        driver=spec.driver,
        pool=spec.pool.name,
        devices=tuple(devices),
        observed_at=now,
    )
    return event, problems


def slice_tracker() -> KeyedTracker[ResourceSlice, ResourceSliceEvent]:
    """Node-local slices only: a slice for many nodes (nodeSelector, allNodes) is not placed by us."""

    def on_gone(name: str, last: ResourceSliceEvent, now: float) -> list[Publication]:
        deleted = msgspec.structs.replace(last, devices=(), deleted=True, observed_at=now)
        return [
            Publication(topic=topics.RESOURCE_SLICES.name, key=name, event=deleted),
            Publication(topic=topics.RESOURCE_SLICES.name, key=name, event=None),
        ]

    return KeyedTracker(slice_event, lambda s: s.metadata.name, on_gone, topics.RESOURCE_SLICES.name)


# --- allocated claims -------------------------------------------------------------------------


def allocation_node(allocation: Allocation) -> str:
    """The one node a node-local allocation is for (`metadata.name In [node]`, as kube-scheduler writes it)."""
    for term in allocation.node_selector.node_selector_terms if allocation.node_selector else []:
        for field in term.match_fields:
            if field.key == "metadata.name" and field.operator == "In" and len(field.values) == 1:
                return field.values[0]
    return ""


def allocated_claim_event(claim: ResourceClaim, now: float) -> tuple[AllocatedClaimEvent, list[Problem]]:
    """The devices an allocated claim holds; a result without driver, pool or device is left out, named."""
    allocation = claim.status.allocation or Allocation()
    meta, devices, problems = claim.metadata, [], []
    for i, result in enumerate(allocation.devices.results):
        missing = [f for f in ("driver", "pool", "device") if not getattr(result, f)]
        if missing:
            problems.append(
                Problem(
                    object=f"{meta.namespace}/{meta.name}",
                    field=f"status.allocation.devices.results[{i}]",
                    reason=f"no {', '.join(missing)}",
                )
            )
            continue
        devices.append(
            AllocatedDevice(
                driver=result.driver,
                pool=result.pool,
                device=result.device,
                admin_access=bool(result.admin_access),
            )
        )
    event = AllocatedClaimEvent(
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        node=allocation_node(allocation),
        devices=tuple(devices),
        observed_at=now,
    )
    return event, problems


def is_allocated(claim: ResourceClaim) -> bool:
    return claim.status.allocation is not None


def allocated_claim_tracker() -> KeyedTracker[ResourceClaim, AllocatedClaimEvent]:
    """Allocated claims by uid; a claim deleted or deallocated is a deleted event, then a tombstone."""

    def on_gone(uid: str, last: AllocatedClaimEvent, now: float) -> list[Publication]:
        deleted = msgspec.structs.replace(last, devices=(), deleted=True, observed_at=now)
        return [
            Publication(topic=topics.RESOURCE_CLAIMS.name, key=uid, event=deleted),
            Publication(topic=topics.RESOURCE_CLAIMS.name, key=uid, event=None),
        ]

    return KeyedTracker(allocated_claim_event, lambda c: c.metadata.uid, on_gone, topics.RESOURCE_CLAIMS.name)


# --- claims of pending pods ----------------------------------------------------------------------


class ClaimError(ValueError):
    """A ResourceClaim the placer cannot read: names the field and the reason."""


def resolved(ref: PodClaim, claim: ResourceClaim) -> PodClaim:
    """The reference filled in with the claim's requests and constraints."""
    where = f"ResourceClaim {claim.metadata.namespace}/{claim.metadata.name}"
    requests = []
    for i, request in enumerate(claim.spec.devices.requests):
        if request.exactly is None:
            raise ClaimError(f"{where}: spec.devices.requests[{i}]: only `exactly` requests are supported")
        exact = request.exactly
        selectors = []
        for j, selector in enumerate(exact.selectors):
            cel = (selector.get("cel") or {}).get("expression") if isinstance(selector, dict) else None
            if not isinstance(cel, str):
                raise ClaimError(f"{where}: spec.devices.requests[{i}].exactly.selectors[{j}]: no cel.expression")
            selectors.append(ClaimSelector(cel=cel))
        requests.append(
            ClaimRequest(
                name=request.name,
                device_class=exact.device_class_name,
                count=exact.count,
                allocation_mode=exact.allocation_mode,
                selectors=tuple(selectors),
            )
        )
    constraints = tuple(
        ClaimConstraint(requests=tuple(c.requests), match_attribute=c.match_attribute)
        for c in claim.spec.devices.constraints
        if c.match_attribute
    )
    return msgspec.structs.replace(ref, claim_uid=claim.metadata.uid, requests=tuple(requests), constraints=constraints)
