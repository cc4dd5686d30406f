"""HAMi v2.7's own choice on NVIDIA GPUs (mode hami), ties included: its walk order, its set
choice (pkg/device/nvidia/device.go Fit) and its node usage score (pkg/scheduler/policy).
"""

from __future__ import annotations

from engine.node.vendor import (
    NodeScratch,
    SetChoice,
    Unfit,
)
from engine.node.vendors.nvidia.links import PairTable
from engine.node.vendors.nvidia.request import (
    DEVICE_SPLIT_COUNT,
    GPU,
    NvidiaRequest,
    assignment_of,
    type_mismatch,
)
from engine.node.vendors.nvidia.search import SetSearch
from schemas.topology import Device, Vendor

HAMI_WEIGHT = 10  # HAMi's util.Weight in its usage scores


def _hami_device_score(scratch: NodeScratch, request: NvidiaRequest, device: Device) -> float:
    """HAMi's per-device usage score (pkg/scheduler/policy/gpu_policy.go ComputeScore)."""
    load = scratch.loads[device.index]
    percent = request.memory_percent or (0 if request.memory_mib else 100)
    # HAMi multiplies by (percent / 100.0) in int32: 1 for 100 %, 0 below.
    memory = device.memory_mib * (percent // 100) if percent not in (0, 101) else request.memory_mib
    used = (request.count + load.pods) / DEVICE_SPLIT_COUNT
    cores_requested = 0 if request.whole else request.cores  # HAMi's default gpucores is 0
    cores = (cores_requested + load.cores_used) / device.cores if device.cores else 0.0
    mem = (memory + load.memory_used_mib) / device.memory_mib if device.memory_mib else 0.0
    w = request.weights  # hami.io/device-scoring-weights; 1, 1, 1 is HAMi's plain score
    return HAMI_WEIGHT * (w.slot * used + w.core * cores + w.memory * mem)


def hami_walk_order(scratch: NodeScratch, request: NvidiaRequest) -> list[Device]:
    """The order HAMi's Fit visits GPUs: sorted by its device policy, then walked from the end.

    Binpack sorts NUMA descending, score ascending; anything else NUMA ascending,
    score descending. Go's sort.Sort is an insertion sort up to 12 elements (stable);
    we sort stably by index for every size.
    """
    gpus = [d for d in scratch.devices.values() if d.vendor is Vendor.NVIDIA]
    scores = {d.index: _hami_device_score(scratch, request, d) for d in gpus}

    def numa(d: Device) -> int:
        return d.numa_node if d.numa_node is not None else 0

    if request.binpack:
        ordered = sorted(gpus, key=lambda d: (-numa(d), scores[d.index]))
    else:
        ordered = sorted(gpus, key=lambda d: (numa(d), -scores[d.index]))
    return list(reversed(ordered))


def hami_search(
    sets: SetSearch, scratch: NodeScratch, request: NvidiaRequest, candidates: tuple[Device, ...], table: PairTable
) -> SetChoice | Unfit:
    usable = {d.index for d in candidates}
    k = request.count
    picked: list[Device] = []
    prev_numa: int | None = None
    walked = 0
    for device in hami_walk_order(scratch, request):
        # HAMi checks health and type before the NUMA reset, the rest after it.
        if not device.healthy or type_mismatch(request, device):
            continue
        numa = device.numa_node if device.numa_node is not None else 0
        if request.numa_bind and numa != prev_numa:
            picked = []
            prev_numa = numa
        walked += 1
        if device.index not in usable:
            continue
        picked.append(device)
        if not request.topology and len(picked) == k:
            return _hami_choice(request, picked, table, walked)
    if len(picked) < k:
        where = " on one NUMA node" if request.numa_bind else ""
        return Unfit(
            reason=f"HAMi's walk found {len(picked)} usable GPU{'' if len(picked) == 1 else 's'}{where}, {k} requested",
            summary=f"Insufficient {GPU}",
        )
    if len(picked) == k:
        return _hami_choice(request, picked, table, walked)
    if k == 1:
        return _hami_choice(request, [_hami_worst_single(picked, table)], table, walked)
    result = sets.best_sets(scratch, table, [table.position(d.index) for d in picked], k, None)
    if not result.exact:
        scratch.warn(f"search bound hit after {result.expanded} branches: best set found, not proven optimal")
    chosen = [picked[p] for p in result.best.positions]
    return _hami_choice(request, chosen, table, result.expanded, exact=result.exact)


def _hami_worst_single(picked: list[Device], table: PairTable) -> Device:
    """The first GPU (walk order) with the strictly lowest total score to the other candidates."""
    worst: Device | None = None
    worst_total = 0
    for device in picked:
        total = sum(table.score(device.index, other.index) for other in picked if other is not device)
        if worst is None or total < worst_total:
            worst, worst_total = device, total
    assert worst is not None
    return worst


def _hami_choice(
    request: NvidiaRequest, chosen: list[Device], table: PairTable, considered: int, exact: bool = True
) -> SetChoice:
    score = table.set_score([d.index for d in chosen])
    return SetChoice(
        assignments=tuple(assignment_of(request, d) for d in chosen),
        set_score=float(score),
        parts={"set_score": float(score), "exact": 1.0 if exact else 0.0},
        exact=exact,
        considered=considered,
    )


def hami_node_usage(scratch: NodeScratch) -> float:
    """HAMi's node score (pkg/scheduler/policy/node_policy.go): usage before this pod."""
    gpus = [d for d in scratch.devices.values() if d.vendor is Vendor.NVIDIA]
    slots = DEVICE_SPLIT_COUNT * len(gpus)
    cores = sum(d.cores for d in gpus)
    memory = sum(d.memory_mib for d in gpus)
    used = sum(scratch.loads[d.index].pods for d in gpus)
    used_cores = sum(scratch.loads[d.index].cores_used for d in gpus)
    used_memory = sum(scratch.loads[d.index].memory_used_mib for d in gpus)
    return HAMI_WEIGHT * (
        (used / slots if slots else 0.0)
        + (used_cores / cores if cores else 0.0)
        + (used_memory / memory if memory else 0.0)
    )
