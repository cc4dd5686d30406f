"""Kubernetes DRA (resource.k8s.io/v1) as the pipeline carries it: slices, claim requests, allocations.

A device attribute keeps its fully qualified name (`resource.kubernetes.io/pcieRoot`,
`gpu.nvidia.com/uuid`); an unqualified name in a slice is qualified with the slice's
driver, as the API defines. Values are the attribute's one value (string, int, bool or
version string).
"""

from __future__ import annotations

import msgspec

from schemas.dra_objects import AllocationResult, ContainerExtendedResourceRequest, ResourceClaimSpec

AttributeValue = str | int | bool

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"  # the finalizer kube-scheduler adds


class DraDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One device of a ResourceSlice."""

    name: str
    uuid: str = ""  # joins the device with the node agent's topology
    attributes: dict[str, AttributeValue] = {}  # fully qualified name -> value
    capacity: dict[str, str] = {}  # name -> Kubernetes quantity


class ClaimSelector(msgspec.Struct, frozen=True, kw_only=True):
    cel: str  # a CEL expression over `device`


class ClaimRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One `exactly` request of a ResourceClaim."""

    name: str
    device_class: str
    count: int = 1
    allocation_mode: str = "ExactCount"  # or "All"
    selectors: tuple[ClaimSelector, ...] = ()


class ClaimConstraint(msgspec.Struct, frozen=True, kw_only=True):
    """constraints[].matchAttribute: every device of `requests` (empty: all) shares the attribute's value."""

    requests: tuple[str, ...] = ()
    match_attribute: str


class PodClaim(msgspec.Struct, frozen=True, kw_only=True):
    """One of a pod's spec.resourceClaims, resolved to its ResourceClaim (empty claim_uid: not read yet)."""

    pod_claim_name: str  # the entry's name in the pod spec
    claim_name: str  # the ResourceClaim's name ("" while a template's claim does not exist)
    claim_uid: str = ""
    requests: tuple[ClaimRequest, ...] = ()
    constraints: tuple[ClaimConstraint, ...] = ()
    # the claim's spec whole (firstAvailable, tolerations, capacity, adminAccess, constraints, config),
    # as the structured allocator reads it; None: not read
    spec: ResourceClaimSpec | None = None
    # why the claim cannot be used yet, in kube-scheduler's words ("": it was read)
    waiting: str = ""
    # the ResourceClaimTemplate the claim is made from ("": the pod names the claim itself)
    template: str = ""
    # "<namespace>/<name>" of the ComputeDomain (resource.nvidia.com) whose channel's claim template
    # `template` is: its pods are kept inside one NVLink clique ("": none)
    compute_domain: str = ""


def claim_not_created(namespace: str, pod: str) -> str:
    """kube-scheduler's reason for a template's claim the controller has not created yet."""
    return f'pod "{namespace}/{pod}": ResourceClaim not created yet'


def claim_not_found(name: str) -> str:
    """kube-scheduler's reason for a claim that does not exist."""
    return f'resourceclaim.resource.k8s.io "{name}" not found'


def claim_being_deleted(namespace: str, name: str) -> str:
    return f"resourceclaim {namespace}/{name} is being deleted"


class DeviceResult(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of status.allocation.devices.results."""

    request: str
    driver: str
    pool: str
    device: str


class ContainerRequests(msgspec.Struct, frozen=True, kw_only=True):
    """One container's resource requests (its limits where it gives no request); init containers first."""

    name: str
    requests: dict[str, str] = {}  # resource name -> Kubernetes quantity


class ExtendedClaimRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The claim to create for a pod's extended resources backed by DRA (KEP-5004), as kube-scheduler
    creates it (owned by the pod), and the pod's `status.extendedResourceClaimStatus` mappings."""

    generate_name: str  # "<pod>-extended-resources-"
    annotations: dict[str, str] = {}  # resource.kubernetes.io/extended-resource-claim: "true"
    spec: ResourceClaimSpec
    request_mappings: tuple[ContainerExtendedResourceRequest, ...] = ()


class ClaimAllocation(msgspec.Struct, frozen=True, kw_only=True):
    """The devices the placer chose for one ResourceClaim."""

    namespace: str
    name: str  # "" for a claim still to be created (`extended`)
    uid: str
    results: tuple[DeviceResult, ...]
    # status.allocation whole as the structured allocator made it (results with shareID,
    # consumedCapacity and tolerations, config with its source); None: results only
    allocation: AllocationResult | None = None
    extended: ExtendedClaimRequest | None = None  # set: the binder creates the claim first (KEP-5004)


DeviceKey = tuple[str, str, str]  # (driver, pool, device): a device's identity in the cluster


class AllocatedDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One device a ResourceClaim's status.allocation names, whoever allocated it."""

    driver: str
    pool: str
    device: str
    # adminAccess: the device stays available to other claims (the structured allocator
    # does not count such a result as allocated).
    admin_access: bool = False

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device)


def device_text(key: DeviceKey) -> str:
    """A device as a reason names it: <driver>/<pool>/<device>."""
    return "/".join(key)
