"""A claim's requests as the search walks them: one entry per request, or per subrequest of
`firstAvailable`; checked before any device is tried, with upstream's errors; pure."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from engine.node.dra.model import (
    CapacityRequirements,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    DeviceToleration,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceSlice,
)
from engine.node.dra.pools import Pool

ALLOCATION_RESULTS_MAX_SIZE = 32  # resource.k8s.io AllocationResultsMaxSize: devices of one claim


class TooManyResults(Exception):
    """A claim would get more than 32 devices down this path (upstream's errAllocationResultMaxSizeExceeded)."""


class AllocationError(ValueError):
    """Allocation cannot proceed for a reason in the claims or the cluster's objects (not: no device fits)."""


class Features(msgspec.Struct, frozen=True, kw_only=True):
    """The DRA feature gates the allocator reads, by Kubernetes' names, on as in the newest release."""

    DRAAdminAccess: bool = True
    DRAPrioritizedList: bool = True
    DRAPartitionableDevices: bool = True
    DRADeviceTaints: bool = True
    DRAConsumableCapacity: bool = True
    DRAListTypeAttributes: bool = False  # alpha (1.36): list attributes are not read without it
    DRAExtendedResource: bool = True  # beta (1.36): extended resources backed by DRA (KEP-5004)
    DRADeviceBindingConditions: bool = True  # beta (1.36): a device's bindsToNode is read


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A device of a pool that serves the node, with where it was published."""

    driver: str
    pool: Pool
    slice: ResourceSlice
    device: Device

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool.name, self.device.name)


class RequestData(msgspec.Struct, kw_only=True):
    """One request or subrequest: its class, selectors and how many devices it takes."""

    claim_index: int
    request_index: int
    sub_index: int  # 0 for a request without subrequests
    request: str  # the request's name
    sub_request: str  # the subrequest's name, "" for none
    device_class: DeviceClass
    selectors: tuple[DeviceSelector, ...]
    mode: str
    count: int
    admin_access: bool
    tolerations: tuple[DeviceToleration, ...]
    capacity: CapacityRequirements | None = None
    num_devices: int = 0
    all_devices: list[Candidate] | None = None  # allocationMode All: the devices, fixed beforehand

    @property
    def name(self) -> str:
        return f"{self.request}/{self.sub_request}" if self.sub_request else self.request


def claim_text(claim: ResourceClaim) -> str:
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _data(
    claim_index: int,
    request_index: int,
    sub_index: int,
    request: DeviceRequest,
    spec: ExactDeviceRequest | DeviceSubRequest,
    claim: ResourceClaim,
    classes: Mapping[str, DeviceClass],
    features: Features,
) -> RequestData:
    sub_name = spec.name if isinstance(spec, DeviceSubRequest) else ""
    what = f"claim {claim_text(claim)}, request {f'{request.name}/{sub_name}' if sub_name else request.name}"
    for i, selector in enumerate(spec.selectors):
        if selector.cel is None:
            raise AllocationError(f"{what}, selector #{i}: CEL expression empty (unsupported selector type?)")
    admin = isinstance(spec, ExactDeviceRequest) and spec.admin_access is not None
    if admin and not features.DRAAdminAccess:
        raise AllocationError(f"{what}: admin access is requested, but the feature is disabled")
    if not spec.device_class_name:
        raise AllocationError(f"{what}: missing device class name (unsupported request type?)")
    device_class = classes.get(spec.device_class_name)
    if device_class is None:
        raise AllocationError(
            f"{what}: could not retrieve device class {spec.device_class_name}: "
            f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found'
        )
    if spec.allocation_mode not in ("ExactCount", "All"):
        raise AllocationError(f"{what}: unsupported count mode {spec.allocation_mode}")
    return RequestData(
        claim_index=claim_index,
        request_index=request_index,
        sub_index=sub_index,
        request=request.name,
        sub_request=sub_name,
        device_class=device_class,
        selectors=spec.selectors,
        mode=spec.allocation_mode,
        count=spec.count,
        admin_access=isinstance(spec, ExactDeviceRequest) and bool(spec.admin_access),
        tolerations=spec.tolerations,
        capacity=spec.capacity,
        num_devices=spec.count if spec.allocation_mode == "ExactCount" else 0,
    )


def request_entries(
    claim_index: int, claim: ResourceClaim, classes: Mapping[str, DeviceClass], features: Features
) -> dict[tuple[int, int], list[RequestData]]:
    """Each request's entries (one, or one per subrequest in order); AllocationError as upstream."""
    out: dict[tuple[int, int], list[RequestData]] = {}
    for r, request in enumerate(claim.spec.devices.requests):
        if request.first_available:
            if not features.DRAPrioritizedList:
                raise AllocationError(
                    f"claim {claim_text(claim)}, request {request.name}: has subrequests, "
                    "but the DRAPrioritizedList feature is disabled"
                )
            out[(claim_index, r)] = [
                _data(claim_index, r, s, request, sub, claim, classes, features)
                for s, sub in enumerate(request.first_available)
            ]
        elif request.exactly is not None:
            out[(claim_index, r)] = [_data(claim_index, r, 0, request, request.exactly, claim, classes, features)]
        else:
            raise AllocationError(
                f"claim {claim_text(claim)}, request {request.name}: neither exactly nor firstAvailable"
            )
    return out


def check_all_pools(data: RequestData, claim: ResourceClaim, pools: list[Pool]) -> None:
    """A request for all devices needs every pool whole and valid (upstream: fail, not guess)."""
    for pool in pools:
        what = f"claim {claim_text(claim)}, request {data.name}: asks for all devices, but resource pool {pool.text}"
        if pool.incomplete:
            raise AllocationError(f"{what} is currently being updated")
        if pool.invalid:
            raise AllocationError(f"{what} is currently invalid")
