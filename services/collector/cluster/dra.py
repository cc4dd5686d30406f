"""DRA objects (resource.k8s.io/v1) -> topoplace records: pure functions, no I/O.

- a ResourceSlice -> ResourceSliceEvent (the slice whole, and its devices with their
  attributes, names qualified with the driver as the API defines, and the uuid that joins the
  node agent's topology);
- a DeviceClass -> DeviceClassEvent (its selectors and config), a DeviceTaintRule ->
  DeviceTaintRuleEvent (its device selector and taint);
- a pod's spec.resourceClaims -> PodClaim references (the claim's name: given directly, or
  from pod.status.resourceClaimStatuses for a template), filled in from the ResourceClaim's
  spec whole, or with kube-scheduler's reason while the claim does not exist.

The objects are decoded into schemas.dra_objects, the Structs the structured allocator reads.
"""

from __future__ import annotations

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
    claim_being_deleted,
    claim_not_created,
    claim_not_found,
)
from schemas.dra_objects import (
    AllocationResult,
    DeviceAttribute,
    DeviceClassSpec,
    DeviceTaintRuleSpec,
    ResourceClaimSpec,
    ResourceClaimStatus,
    ResourceSliceSpec,
)
from schemas.events import AllocatedClaimEvent, DeviceClassEvent, DeviceTaintRuleEvent, ResourceSliceEvent
from services.collector.cluster.objects import ObjectMeta
from services.collector.cluster.trackers import KeyedTracker, Publication
from services.collector.cluster.translate import Problem

UUID_ATTRIBUTES = ("uuid",)  # NVIDIA's driver publishes `uuid`, qualified as gpu.nvidia.com/uuid


class ResourceSlice(msgspec.Struct, kw_only=True):
    """A ResourceSlice: its spec decoded once, as the wire and the structured allocator read it."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec


class ResourceClaim(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = ResourceClaimSpec()
    status: ResourceClaimStatus = ResourceClaimStatus()


class DeviceTaintRule(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeviceTaintRuleSpec


class DeviceClass(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = DeviceClassSpec()


# --- slices -----------------------------------------------------------------------------------


def qualified(driver: str, name: str) -> str:
    """An attribute name as CEL sees it: unqualified names belong to the driver's domain."""
    return name if "/" in name else f"{driver}/{name}"


def _attribute_value(value: DeviceAttribute) -> AttributeValue | None:
    for parsed in (value.string, value.int_value, value.bool_value, value.version):
        if parsed is not None:
            return parsed
    return None


def slice_event(obj: ResourceSlice, now: float) -> tuple[ResourceSliceEvent, list[Problem]]:
    spec, problems = obj.spec, []
    devices = []
    for device in spec.devices:
        attributes: dict[str, AttributeValue] = {}
        for name, value in device.attributes.items():
            parsed = _attribute_value(value)
            if parsed is None and any(v for v in (value.ints, value.bools, value.strings, value.versions)):
                continue  # a list attribute (KEP-5491): the allocator reads it from the slice whole (`spec`)
            if parsed is None:
                problems.append(
                    Problem(
                        object=obj.metadata.name,
                        field=f"spec.devices[{device.name}].attributes[{name}]",
                        reason="no string, int, bool or version value, nor a list of them",
                    )
                )
                continue
            attributes[qualified(spec.driver, name)] = parsed
        uuid = next(
            (str(v) for k, v in attributes.items() if k.rsplit("/", 1)[-1] in UUID_ATTRIBUTES and isinstance(v, str)),
            "",
        )
        capacity = {n: v.value for n, v in device.capacity.items()}
        devices.append(DraDevice(name=device.name, uuid=uuid, attributes=attributes, capacity=capacity))
    event = ResourceSliceEvent(
        name=obj.metadata.name,
        node=spec.node_name or "",
        driver=spec.driver,
        pool=spec.pool.name,
        devices=tuple(devices),
        spec=spec,
        observed_at=now,
    )
    return event, problems


def slice_tracker() -> KeyedTracker[ResourceSlice, ResourceSliceEvent]:
    """Every slice, node-local or for many nodes (nodeSelector, allNodes): the allocator reads them all."""

    def on_gone(name: str, last: ResourceSliceEvent, now: float) -> list[Publication]:
        deleted = msgspec.structs.replace(last, devices=(), deleted=True, observed_at=now)
        return [
            Publication(topic=topics.RESOURCE_SLICES.name, key=name, event=deleted),
            Publication(topic=topics.RESOURCE_SLICES.name, key=name, event=None),
        ]

    return KeyedTracker(slice_event, lambda s: s.metadata.name, on_gone, topics.RESOURCE_SLICES.name)


# --- allocated claims -------------------------------------------------------------------------


def allocation_node(allocation: AllocationResult) -> str:
    """The one node a node-local allocation is for (`metadata.name In [node]`, as kube-scheduler writes it)."""
    for term in allocation.node_selector.node_selector_terms if allocation.node_selector else []:
        for field in term.match_fields:
            if field.key == "metadata.name" and field.operator == "In" and len(field.values) == 1:
                return field.values[0]
    return ""


def allocated_claim_event(claim: ResourceClaim, now: float) -> tuple[AllocatedClaimEvent, list[Problem]]:
    """The devices an allocated claim holds; a result without driver, pool or device is left out, named."""
    allocation = claim.status.allocation or AllocationResult()
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
        allocation=claim.status.allocation,
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


def resolved(ref: PodClaim, claim: ResourceClaim) -> PodClaim:
    """The reference filled in with the claim's spec whole (and its `exactly` requests and
    matchAttribute constraints in the compact form), or the reason it cannot be used yet."""
    meta = claim.metadata
    if meta.deletion_timestamp is not None:
        return msgspec.structs.replace(ref, claim_uid=meta.uid, waiting=claim_being_deleted(meta.namespace, meta.name))
    requests = tuple(
        ClaimRequest(
            name=request.name,
            device_class=request.exactly.device_class_name,
            count=request.exactly.count,
            allocation_mode=request.exactly.allocation_mode,
            selectors=tuple(ClaimSelector(cel=s.cel.expression) for s in request.exactly.selectors if s.cel),
        )
        for request in claim.spec.devices.requests
        if request.exactly is not None
    )
    constraints = tuple(
        ClaimConstraint(requests=c.requests, match_attribute=c.match_attribute)
        for c in claim.spec.devices.constraints
        if c.match_attribute
    )
    return msgspec.structs.replace(
        ref, claim_uid=meta.uid, requests=requests, constraints=constraints, spec=claim.spec, waiting=""
    )


def waiting(namespace: str, pod: str, ref: PodClaim) -> PodClaim:
    """A claim that does not exist (yet): kube-scheduler's reason, so the pod is decided and told why."""
    why = claim_not_found(ref.claim_name) if ref.claim_name else claim_not_created(namespace, pod)
    return msgspec.structs.replace(ref, waiting=why)


# --- device classes ---------------------------------------------------------------------------------


def class_event(obj: DeviceClass, now: float) -> tuple[DeviceClassEvent, list[Problem]]:
    return DeviceClassEvent(name=obj.metadata.name, spec=obj.spec, observed_at=now), []


def class_tracker() -> KeyedTracker[DeviceClass, DeviceClassEvent]:
    """DeviceClasses by name; a deleted one is a deleted event, then a tombstone."""

    def on_gone(name: str, last: DeviceClassEvent, now: float) -> list[Publication]:
        deleted = msgspec.structs.replace(last, deleted=True, observed_at=now)
        return [
            Publication(topic=topics.RESOURCE_CLASSES.name, key=name, event=deleted),
            Publication(topic=topics.RESOURCE_CLASSES.name, key=name, event=None),
        ]

    return KeyedTracker(class_event, lambda c: c.metadata.name, on_gone, topics.RESOURCE_CLASSES.name)


# --- device taint rules -----------------------------------------------------------------------------


def taint_rule_event(obj: DeviceTaintRule, now: float) -> tuple[DeviceTaintRuleEvent, list[Problem]]:
    return DeviceTaintRuleEvent(name=obj.metadata.name, spec=obj.spec, observed_at=now), []


def taint_rule_tracker() -> KeyedTracker[DeviceTaintRule, DeviceTaintRuleEvent]:
    """DeviceTaintRules by name; a deleted one is a deleted event, then a tombstone."""

    def on_gone(name: str, last: DeviceTaintRuleEvent, now: float) -> list[Publication]:
        deleted = msgspec.structs.replace(last, spec=None, deleted=True, observed_at=now)
        return [
            Publication(topic=topics.RESOURCE_TAINT_RULES.name, key=name, event=deleted),
            Publication(topic=topics.RESOURCE_TAINT_RULES.name, key=name, event=None),
        ]

    return KeyedTracker(taint_rule_event, lambda r: r.metadata.name, on_gone, topics.RESOURCE_TAINT_RULES.name)
