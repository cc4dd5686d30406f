"""Extended resources backed by DRA (KEP-5004, gate DRAExtendedResource): a pod asking `nvidia.com/gpu: 2`
the old way on a node that publishes its GPUs only as ResourceSlices; pure.

As kube-scheduler's dynamicresources plugin does it:

- a DeviceClass serves the extended resource its `extendedResourceName` names (several naming one:
  the newest by creationTimestamp, then the first by name), and every class serves its implicit
  name `deviceclass.resource.kubernetes.io/<class>`;
- on a node, a resource the pod asks (a positive whole quantity) that a class serves and the node's
  allocatable does not hold (absent or zero: no device plugin publishes it there) is backed by DRA;
- those become one claim of the pod, the one kube-scheduler creates (generateName
  `<pod>-extended-resources-`, annotation `resource.kubernetes.io/extended-resource-claim: "true"`):
  one `ExactCount` request per container (init containers first) and resource, named
  `container-<i>-request-<j>` (j: the resource's place among the container's sorted requests),
  the requests in name order; and the pod's `status.extendedResourceClaimStatus` maps each
  container's resource to its request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from engine.node.dra.model import (
    ContainerExtendedResourceRequest,
    DeviceClaim,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ObjectMeta,
    ResourceClaim,
    ResourceClaimSpec,
)
from schemas.dra import ContainerRequests
from schemas.quantity import QuantityError, parse_quantity

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IN_MEMORY_NAME = "<extended-resources>"  # kube-scheduler's name for the claim before the API names it


class ExtendedClaim(msgspec.Struct, frozen=True, kw_only=True):
    """The claim kube-scheduler would create for a pod on a node, and the pod status that names it."""

    claim: ResourceClaim  # metadata.name IN_MEMORY_NAME until created
    generate_name: str
    request_mappings: tuple[ContainerExtendedResourceRequest, ...]


def class_mapping(classes: Iterable[DeviceClass]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass that serves it (explicit names, and every implicit one)."""
    listed = sorted(classes, key=lambda c: c.metadata.name)
    out = {IMPLICIT_PREFIX + c.metadata.name: c.metadata.name for c in listed}
    # newest first; among equally new ones the first by name (a stable sort keeps name order)
    for c in sorted(listed, key=lambda c: c.metadata.creation_timestamp or "", reverse=True):
        name = c.spec.extended_resource_name
        if name and name not in out:
            out[name] = c.metadata.name
    return out


def whole_count(quantity: str) -> int:
    """A quantity's value when it is a whole number (kube's AsInt64), else 0: not asked as devices."""
    try:
        value = parse_quantity(str(quantity))
    except QuantityError:
        return 0
    return int(value) if value == value.to_integral_value() else 0


def dra_backed(
    asked: Mapping[str, str], allocatable: Mapping[str, str] | None, mapping: Mapping[str, str]
) -> tuple[str, ...]:
    """The resources the pod asks (its effective requests) that a class serves and the node does not hold."""
    held = allocatable or {}
    return tuple(
        sorted(
            name
            for name, quantity in asked.items()
            if name in mapping and whole_count(quantity) > 0 and whole_count(held.get(name, "0")) == 0
        )
    )


def _request_name(index: int, container: ContainerRequests, resource: str) -> str:
    return f"container-{index}-request-{sorted(container.requests).index(resource)}"


def extended_claim(
    namespace: str,
    pod_name: str,
    pod_uid: str,
    containers: tuple[ContainerRequests, ...],
    backed: Iterable[str],
    mapping: Mapping[str, str],
) -> ExtendedClaim | None:
    """The pod's claim for the resources backed by DRA on a node; None when no container asks one."""
    names = frozenset(backed)
    requests = sorted(
        (
            DeviceRequest(
                name=_request_name(i, container, resource),
                exactly=ExactDeviceRequest(device_class_name=mapping[resource], count=count),
            )
            for i, container in enumerate(containers)
            for resource in sorted(names & container.requests.keys())
            if (count := whole_count(container.requests[resource])) > 0
        ),
        key=lambda r: r.name,
    )
    if not requests:
        return None
    made = {r.name for r in requests}
    mappings = tuple(
        ContainerExtendedResourceRequest(
            container_name=container.name, resource_name=resource, request_name=_request_name(i, container, resource)
        )
        for i, container in enumerate(containers)
        for resource in sorted(container.requests)
        if _request_name(i, container, resource) in made
    )
    meta = ObjectMeta(
        name=IN_MEMORY_NAME,
        namespace=namespace,
        uid=f"{pod_uid}/extended-resources",
        annotations={EXTENDED_CLAIM_ANNOTATION: "true"},
    )
    claim = ResourceClaim(metadata=meta, spec=ResourceClaimSpec(devices=DeviceClaim(requests=tuple(requests))))
    return ExtendedClaim(claim=claim, generate_name=f"{pod_name}-extended-resources-", request_mappings=mappings)
