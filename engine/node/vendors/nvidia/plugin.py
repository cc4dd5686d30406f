"""The NVIDIA vendor plugin: the device filter, the set search by mode, the node score by policy.

The request is read in request.py; default mode searches in search.py, mode hami reproduces
HAMi in hami.py, and the fragmentation policy scores in fragmentation.py.

Node annotation: hami.io/device-cordon (comma-separated GPU UUIDs an operator took
out of new allocations), honoured in every mode.
"""

from __future__ import annotations

from math import comb

from engine.core.memo import BoundedCache
from engine.core.model import Mode, PodRequest, WorkloadClass
from engine.node.fragmentation import heavy_ratio
from engine.node.registry import VendorContext
from engine.node.vendor import (
    DeviceRequest,
    NodePolicy,
    NodeScore,
    NodeScratch,
    Rejection,
    SetChoice,
    Unfit,
)
from engine.node.vendors.nvidia.fragmentation import fragmentation_applies, fragmentation_score
from engine.node.vendors.nvidia.hami import HAMI_WEIGHT, hami_node_usage, hami_search
from engine.node.vendors.nvidia.request import (
    DEVICE_SPLIT_COUNT,
    GPUCORES,
    GPUMEM,
    GPUMEM_PERCENTAGE,
    NOUSE_UUID,
    USE_UUID,
    NvidiaRequest,
    parse_host_request,
    parse_nvidia_request,
    type_mismatch,
)
from engine.node.vendors.nvidia.search import SetSearch, default_search
from schemas import hami
from schemas.topology import Device, Vendor

CORDONED = f"cordoned by {hami.DEVICE_CORDON}"


# Node score weights (default mode), see docs/engine.md.
FILL_WEIGHT = 20.0  # one PCIe level is 10, one NVLink 100: packing never outweighs an NVLink
REMAINDER_WEIGHT = 10.0
HEAVY_BOUND = 64  # workloads whose CPU-per-GPU median is kept


class NvidiaPlugin:
    vendor = Vendor.NVIDIA
    name = "nvidia"
    share_resources = (GPUMEM, GPUMEM_PERCENTAGE, GPUCORES)
    node_annotations_read = (hami.DEVICE_CORDON,)

    def __init__(self, context: VendorContext) -> None:
        """Made once per engine: its set search and the workload medians keep their tables in the engine's memo."""
        self._memo = context.memo
        self._sets = SetSearch(context)
        self._heavy: BoundedCache[tuple[WorkloadClass, ...], tuple[float | None]] = context.memo.table(HEAVY_BOUND)

    # --- request (request.py) -------------------------------------------------------------

    def parse_request(self, request: PodRequest) -> NvidiaRequest | None:
        return parse_nvidia_request(request)

    def parse_host_request(self, request: PodRequest) -> NvidiaRequest | None:
        return parse_host_request(request)

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
        return default_search(self._sets, scratch, request, candidates, table)

    # --- node score ---------------------------------------------------------------------

    def node_score(self, scratch: NodeScratch, request: DeviceRequest, choice: SetChoice) -> NodeScore:
        assert isinstance(request, NvidiaRequest)
        if scratch.mode is Mode.HAMI:
            usage = hami_node_usage(scratch)
            score = usage if request.node_policy is NodePolicy.BINPACK else 3 * HAMI_WEIGHT - usage
            return NodeScore(score=round(score, 6), parts={"hami_usage": round(usage, 6)})
        if fragmentation_applies(request):
            return fragmentation_score(scratch, request, choice, self._heavy_ratio(request.workload))
        k = len(choice.assignments)
        link = choice.set_score / comb(k, 2) if k >= 2 else 0.0
        fill = _fill_after(scratch, request, choice)
        # fragmentation without a workload packs (documented fallback)
        fill_term = FILL_WEIGHT * (1.0 - fill if request.node_policy is NodePolicy.SPREAD else fill)
        before = choice.parts.get("idle_score_before", 0.0)
        loss = choice.parts.get("remainder_loss", 0.0)
        remainder = -REMAINDER_WEIGHT * (loss / before) + 0.0 if before > 0 else 0.0  # + 0.0: no -0
        score = link + fill_term + remainder
        return NodeScore(
            score=round(score, 6),
            parts={"link": round(link, 6), "fill": round(fill_term, 6), "remainder": round(remainder, 6)},
        )

    def _heavy_ratio(self, workload: tuple[WorkloadClass, ...]) -> float | None:
        """The workload's CPU-per-GPU median, asked per node answer: kept per workload (a cluster has one at a time)."""
        found = self._memo.remembered(self._heavy, lambda: workload, lambda: (heavy_ratio(workload),))
        return found[0]


def _fill_after(scratch: NodeScratch, request: NvidiaRequest, choice: SetChoice) -> float:
    """Mean share of each GPU in use after the placement (max of memory and cores)."""
    gpus = [d for d in scratch.devices.values() if d.vendor is Vendor.NVIDIA and d.healthy]
    if not gpus:
        return 0.0
    chosen = {a.index: a for a in choice.assignments}
    total = 0.0
    for d in gpus:
        load = scratch.loads[d.index]
        memory, cores = load.memory_used_mib, load.cores_used
        if d.index in chosen:
            memory += request.memory_for(d)
            cores += 100 if request.whole else request.cores
        total += min(1.0, max(memory / d.memory_mib if d.memory_mib else 0.0, cores / d.cores if d.cores else 0.0))
    return total / len(gpus)
