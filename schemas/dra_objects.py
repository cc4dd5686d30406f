"""resource.k8s.io/v1 objects as the structured allocator reads them and the wire carries them; Kubernetes JSON names.

One decoder for DRA objects: the cluster watcher decodes what it watches into these, the events
carry them, and the engine's allocator (engine/node/dra) reads them.

Only the fields the allocator uses are declared; everything else of an object is
ignored when it is decoded. Opaque driver parameters stay as they came (the API
defines them as raw JSON for the driver, never read by a scheduler).
"""

from __future__ import annotations

from typing import Any

import msgspec


class _Kube(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """A Kubernetes object part: camelCase JSON names, defaults left out when written."""


class ObjectMeta(_Kube, frozen=True, kw_only=True):
    name: str
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None  # RFC 3339: orders DeviceClasses naming one extended resource


class NodeSelectorRequirement(_Kube, frozen=True, kw_only=True):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


class NodeSelectorTerm(_Kube, frozen=True, kw_only=True):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(_Kube, frozen=True, kw_only=True):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class DeviceAttribute(_Kube, frozen=True, kw_only=True):
    """Exactly one of the values is set (the API validates that): a scalar, or a non-empty list
    (`ints`, `bools`, `strings`, `versions`: KEP-5491, feature gate DRAListTypeAttributes)."""

    int_value: int | None = msgspec.field(default=None, name="int")
    bool_value: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None
    ints: tuple[int, ...] | None = None
    bools: tuple[bool, ...] | None = None
    strings: tuple[str, ...] | None = None
    versions: tuple[str, ...] | None = None


class CapacityRequestPolicyRange(_Kube, frozen=True, kw_only=True):
    min: str | None = None
    max: str | None = None
    step: str | None = None


class CapacityRequestPolicy(_Kube, frozen=True, kw_only=True):
    """How a request for a consumable capacity is rounded (default: what an unasked capacity takes)."""

    default: str | None = None
    valid_values: tuple[str, ...] = ()
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(_Kube, frozen=True, kw_only=True):
    value: str  # a Kubernetes quantity
    request_policy: CapacityRequestPolicy | None = None


class CapacityRequirements(_Kube, frozen=True, kw_only=True):
    requests: dict[str, str] = {}  # capacity name -> quantity


class DeviceTaint(_Kube, frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: str  # NoSchedule, NoExecute, None


class DeviceToleration(_Kube, frozen=True, kw_only=True):
    key: str = ""
    operator: str = "Equal"  # or Exists
    value: str = ""
    effect: str = ""  # empty: every effect
    toleration_seconds: int | None = None


class Counter(_Kube, frozen=True, kw_only=True):
    value: str  # a Kubernetes quantity


class CounterSet(_Kube, frozen=True, kw_only=True):
    name: str
    counters: dict[str, Counter] = {}


class DeviceCounterConsumption(_Kube, frozen=True, kw_only=True):
    counter_set: str
    counters: dict[str, Counter] = {}


class Device(_Kube, frozen=True, kw_only=True):
    name: str
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    node_name: str | None = None  # with the slice's perDeviceNodeSelection
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: tuple[DeviceTaint, ...] = ()
    allow_multiple_allocations: bool | None = None  # consumable capacity: shared by several allocations
    # binding conditions (DRADeviceBindingConditions): the device is ready for the pod only once
    # each of these conditions is True in the claim's status.devices; any failure one True: it failed
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool | None = None


class ResourcePool(_Kube, frozen=True, kw_only=True):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(_Kube, frozen=True, kw_only=True):
    driver: str
    pool: ResourcePool
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


class ResourceSlice(_Kube, frozen=True, kw_only=True):
    metadata: ObjectMeta
    spec: ResourceSliceSpec


class CELDeviceSelector(_Kube, frozen=True, kw_only=True):
    expression: str


class DeviceSelector(_Kube, frozen=True, kw_only=True):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(_Kube, frozen=True, kw_only=True):
    driver: str
    parameters: Any = None  # raw JSON for the driver: copied, never read


class DeviceClassConfiguration(_Kube, frozen=True, kw_only=True):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(_Kube, frozen=True, kw_only=True):
    selectors: tuple[DeviceSelector, ...] = ()
    config: tuple[DeviceClassConfiguration, ...] = ()
    extended_resource_name: str | None = None  # KEP-5004: pods asking this resource the old way get these devices


class DeviceClass(_Kube, frozen=True, kw_only=True):
    metadata: ObjectMeta
    spec: DeviceClassSpec = DeviceClassSpec()


class ExactDeviceRequest(_Kube, frozen=True, kw_only=True):
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str = "ExactCount"  # or All
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(_Kube, frozen=True, kw_only=True):
    name: str
    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None


class DeviceRequest(_Kube, frozen=True, kw_only=True):
    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


class DeviceConstraint(_Kube, frozen=True, kw_only=True):
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaimConfiguration(_Kube, frozen=True, kw_only=True):
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(_Kube, frozen=True, kw_only=True):
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()


class ResourceClaimSpec(_Kube, frozen=True, kw_only=True):
    devices: DeviceClaim = DeviceClaim()


class DeviceRequestAllocationResult(_Kube, frozen=True, kw_only=True):
    # required by the API; a result without one is named by whoever reads it, not refused whole
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    share_id: str | None = msgspec.field(default=None, name="shareID")  # one share of a shared device
    consumed_capacity: dict[str, str] = {}
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()


class DeviceAllocationConfiguration(_Kube, frozen=True, kw_only=True):
    source: str  # FromClass or FromClaim
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(_Kube, frozen=True, kw_only=True):
    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[DeviceAllocationConfiguration, ...] = ()


class AllocationResult(_Kube, frozen=True, kw_only=True):
    devices: DeviceAllocationResult = DeviceAllocationResult()
    node_selector: NodeSelector | None = None


class ResourceClaimStatus(_Kube, frozen=True, kw_only=True):
    allocation: AllocationResult | None = None


class ResourceClaim(_Kube, frozen=True, kw_only=True):
    metadata: ObjectMeta
    spec: ResourceClaimSpec = ResourceClaimSpec()
    status: ResourceClaimStatus = ResourceClaimStatus()


class DeviceTaintSelector(_Kube, frozen=True, kw_only=True):
    """Which devices a DeviceTaintRule taints: the empty selector, all of them."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(_Kube, frozen=True, kw_only=True):
    device_selector: DeviceTaintSelector | None = None  # none: no device
    taint: DeviceTaint


class DeviceTaintRule(_Kube, frozen=True, kw_only=True):
    metadata: ObjectMeta
    spec: DeviceTaintRuleSpec


class ContainerExtendedResourceRequest(_Kube, frozen=True, kw_only=True):
    """core/v1: which request of the pod's extended-resource claim serves a container's extended resource."""

    container_name: str
    resource_name: str
    request_name: str


class PodExtendedResourceClaimStatus(_Kube, frozen=True, kw_only=True):
    """core/v1 pod `status.extendedResourceClaimStatus` (KEP-5004), as kube-scheduler writes it."""

    resource_claim_name: str
    request_mappings: tuple[ContainerExtendedResourceRequest, ...] = ()
