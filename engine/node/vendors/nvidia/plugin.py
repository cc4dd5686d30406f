"""The NVIDIA vendor plugin: the device filter, the set search by mode, the measures the node policies read.

The request is read in request.py; default mode searches in search.py, mode hami reproduces
HAMi in hami.py, and measures.py says what the node policies (engine/node/policies/) read of a node.

Node annotation: hami.io/device-cordon (comma-separated GPU UUIDs an operator took
out of new allocations), honoured in every mode.
"""

from __future__ import annotations

from engine.core.model import Mode, PodRequest
from engine.node.registry import VendorContext
from engine.node.vendor import (
    DeviceRequest,
    NodeScratch,
    Rejection,
    SetChoice,
    Unfit,
)
from engine.node.vendors.nvidia.hami import hami_search
from engine.node.vendors.nvidia.measures import NvidiaMeasures
from engine.node.vendors.nvidia.request import (
    DEVICE_SPLIT_COUNT,
    GPUCORES,
    GPUMEM,
    NOUSE_UUID,
    USE_UUID,
    NvidiaRequest,
    host_request,
    parse_nvidia_request,
    type_mismatch,
)
from engine.node.vendors.nvidia.search import SetSearch, default_search
from schemas import hami
from schemas.topology import Device, Vendor
from schemas.vendors import NVIDIA

CORDONED = f"cordoned by {hami.DEVICE_CORDON}"


class NvidiaPlugin:
    vendor = Vendor.NVIDIA
    name = "nvidia"
    share_resources = NVIDIA.unreported  # gpumem, gpumem-percentage, gpucores
    node_annotations_read = (hami.DEVICE_CORDON,)

    def __init__(self, context: VendorContext) -> None:
        """Made once per engine: its set search keeps its tables in the engine's memo."""
        self._policies = context.policies
        self._sets = SetSearch(context)

    # --- request (request.py) -------------------------------------------------------------

    def parse_request(self, request: PodRequest) -> NvidiaRequest | None:
        parsed = parse_nvidia_request(request)
        if parsed is not None:
            self._policies.check(parsed)
        return parsed

    def parse_host_request(self, request: PodRequest) -> NvidiaRequest | None:
        """A pod without GPUs, for a node policy that scores such pods (one that reads the workload)."""
        parsed = host_request(request)
        return parsed if self._policies.named(parsed.node_policy).reads_workload else None

    # --- filter -------------------------------------------------------------------------

    def filter_device(self, scratch: NodeScratch, request: DeviceRequest, device: Device) -> str | Rejection | None:
        assert isinstance(request, NvidiaRequest)
        if not device.healthy:
            return "unhealthy"
        type_reason = type_mismatch(request, device)
        if type_reason:
            return type_reason
        if request.use_uuids and device.uuid not in request.use_uuids:
            return f"not listed in {USE_UUID}"
        if device.uuid in request.nouse_uuids:
            return f"excluded by {NOUSE_UUID}"
        if hami.is_cordoned(scratch.node.annotations, device.index, device.uuid):
            return CORDONED
        load = scratch.loads[device.index]
        if load.pods >= DEVICE_SPLIT_COUNT:
            return f"already shared by {load.pods} pods (at most {DEVICE_SPLIT_COUNT})"
        if (request.whole or request.mutex or request.cores >= 100) and load.pods > 0:
            why = "mutex policy needs" if request.mutex and not request.whole else "whole-GPU request needs"
            return f"in use by {load.pods} pod(s); {why} an idle GPU"
        free_memory = device.memory_mib - load.memory_used_mib
        needed = request.memory_for(device)
        if free_memory < needed:
            return Rejection(reason=f"{free_memory} MiB free, {needed} MiB requested", summary=f"Insufficient {GPUMEM}")
        free_cores = device.cores - load.cores_used
        if free_cores < request.cores:
            return Rejection(
                reason=f"{free_cores}% cores free, {request.cores}% requested", summary=f"Insufficient {GPUCORES}"
            )
        if request.cores == 0 and free_cores == 0:
            return "all cores taken"
        return None

    # --- search -------------------------------------------------------------------------

    def search(self, scratch: NodeScratch, request: DeviceRequest, candidates: tuple[Device, ...]) -> SetChoice | Unfit:
        assert isinstance(request, NvidiaRequest)
        table = self._sets.pair_table(scratch)
        for note in table.notes:
            scratch.warn(note)
        if scratch.mode is Mode.HAMI:
            return hami_search(self._sets, scratch, request, candidates, table)
        policy = self._policies.named(request.node_policy)
        return default_search(self._sets, scratch, request, candidates, table, policy, NvidiaMeasures(scratch, request))

    # --- measures (measures.py) ---------------------------------------------------------

    def measures(self, scratch: NodeScratch, request: DeviceRequest) -> NvidiaMeasures:
        assert isinstance(request, NvidiaRequest)
        return NvidiaMeasures(scratch, request)
