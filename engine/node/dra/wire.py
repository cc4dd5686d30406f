"""The pipeline's DRA wire types (schemas.dra) as the structured allocator reads them; pure.

The placer carries slices and claims in its own compact form; these build the
resource.k8s.io/v1 objects the allocator takes from them. Attribute names stay fully
qualified; a version attribute arrives as a string and is read as one.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.node.dra.model import (
    CELDeviceSelector,
    Device,
    DeviceAttribute,
    DeviceCapacity,
    DeviceClaim,
    DeviceClass,
    DeviceClassSpec,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    ExactDeviceRequest,
    ObjectMeta,
    ResourceClaim,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from schemas.dra import DraDevice, PodClaim


def engine_device(device: DraDevice) -> Device:
    """A slice device as the engine's allocator reads it (attribute names stay fully qualified)."""
    attributes = {}
    for name, value in device.attributes.items():
        if isinstance(value, bool):
            attributes[name] = DeviceAttribute(bool_value=value)
        elif isinstance(value, int):
            attributes[name] = DeviceAttribute(int_value=value)
        else:
            attributes[name] = DeviceAttribute(string=value)
    capacity = {name: DeviceCapacity(value=value) for name, value in device.capacity.items()}
    return Device(name=device.name, attributes=attributes, capacity=capacity)


def engine_claim(namespace: str, claim: PodClaim) -> ResourceClaim:
    """A pod's claim as a ResourceClaim: its exactly requests and matchAttribute constraints."""
    requests = tuple(
        DeviceRequest(
            name=r.name,
            exactly=ExactDeviceRequest(
                device_class_name=r.device_class,
                count=r.count,
                allocation_mode=r.allocation_mode,
                selectors=tuple(DeviceSelector(cel=CELDeviceSelector(expression=s.cel)) for s in r.selectors),
            ),
        )
        for r in claim.requests
    )
    constraints = tuple(
        DeviceConstraint(requests=c.requests, match_attribute=c.match_attribute) for c in claim.constraints
    )
    return ResourceClaim(
        metadata=ObjectMeta(name=claim.claim_name, namespace=namespace, uid=claim.claim_uid),
        spec=ResourceClaimSpec(devices=DeviceClaim(requests=requests, constraints=constraints)),
    )


def engine_classes(claims: tuple[PodClaim, ...], drivers: Mapping[str, str]) -> dict[str, DeviceClass]:
    """The claims' device classes the placer knows (class -> driver), as DeviceClasses selecting the driver."""
    names = {r.device_class for claim in claims for r in claim.requests if r.device_class in drivers}
    return {
        name: DeviceClass(
            metadata=ObjectMeta(name=name),
            spec=DeviceClassSpec(
                selectors=(DeviceSelector(cel=CELDeviceSelector(expression=f'device.driver == "{drivers[name]}"')),)
            ),
        )
        for name in sorted(names)
    }


def engine_slices(node: str, devices: list[tuple[str, str, DraDevice]]) -> tuple[ResourceSlice, ...]:
    """(driver, pool, device) of one node as one slice per pool."""
    pools: dict[tuple[str, str], list[DraDevice]] = {}
    for driver, pool, device in devices:
        pools.setdefault((driver, pool), []).append(device)
    return tuple(
        ResourceSlice(
            metadata=ObjectMeta(name=f"{driver}-{pool}"),
            spec=ResourceSliceSpec(
                driver=driver,
                pool=ResourcePool(name=pool),
                node_name=node,
                devices=tuple(engine_device(d) for d in members),
            ),
        )
        for (driver, pool), members in sorted(pools.items())
    )
