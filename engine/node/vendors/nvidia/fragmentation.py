"""NVIDIA under the fragmentation node policy (FGD, default mode): the node score and a share's GPU.

The measure itself is the engine's (engine/node/fragmentation.py); this module feeds it each GPU's
free share before and after the pod, and picks the GPU a one-GPU share fragments least.
"""

from __future__ import annotations

from engine.core.model import MILLI
from engine.node.fragmentation import (
    DIGITS,
    FreeShare,
    NodeCpu,
    PodShape,
    fragmentation,
    level,
    node_cpu,
    tie,
)
from engine.node.vendor import (
    NodePolicy,
    NodeScore,
    NodeScratch,
    SetChoice,
)
from engine.node.vendors.nvidia.links import PairTable, cut
from engine.node.vendors.nvidia.request import (
    DEVICE_SPLIT_COUNT,
    NvidiaRequest,
)
from schemas.topology import Device, Vendor

# Fragmentation policy: the delta counts to 1/1000 of a milli-GPU before it is binned into levels.
DELTA_DIGITS = 3


def fragmentation_applies(request: NvidiaRequest) -> bool:
    """The fragmentation policy with a known workload (without one it is binpack)."""
    return request.node_policy is NodePolicy.FRAGMENTATION and bool(request.workload)


def _free_share(device: Device, memory_used: int, cores_used: int, pods: int) -> FreeShare:
    """A GPU's free share in milli: the scarcer of memory and cores; none once the split count is reached."""
    if not device.healthy or pods >= DEVICE_SPLIT_COUNT:
        return FreeShare(milli=0, idle=False, model=device.model)
    memory = max(0, device.memory_mib - memory_used) * MILLI // device.memory_mib if device.memory_mib else 0
    cores = max(0, device.cores - cores_used) * MILLI // device.cores if device.cores else 0
    return FreeShare(milli=min(memory, cores), idle=pods == 0, model=device.model)


def _shares_after(scratch: NodeScratch, request: NvidiaRequest, taken: tuple[int, ...]) -> list[FreeShare]:
    """Each GPU's free share once the pod holds the GPUs `taken` (none: as it is now)."""
    shares: list[FreeShare] = []
    for d in scratch.devices.values():
        if d.vendor is not Vendor.NVIDIA:
            continue
        load = scratch.loads[d.index]
        memory, cores, pods = load.memory_used_mib, load.cores_used, load.pods
        if d.index in taken:
            memory += request.memory_for(d)
            cores += 100 if request.whole else request.cores
            pods += 1
        shares.append(_free_share(d, memory, cores, pods))
    return shares


def _policy_cpu(scratch: NodeScratch, request: NvidiaRequest) -> NodeCpu | None:
    """The node's CPU when the policy weighs it (the request carries the pod's), else None."""
    return node_cpu(scratch.node) if request.cpu_milli is not None else None


def _cpu_free(cpu: NodeCpu | None, request: NvidiaRequest, *, placed: bool) -> int | None:
    """The node's free CPU before the pod, or (`placed`) once it holds its CPU; None when not weighed."""
    return None if cpu is None else cpu.free - ((request.cpu_milli or 0) if placed else 0)


def _share_milli(request: NvidiaRequest, device: Device) -> int:
    """Thousandths of `device` the pod takes: the larger of its memory and core shares."""
    if request.whole:
        return MILLI
    memory = request.memory_for(device) * MILLI // device.memory_mib if device.memory_mib else 0
    return min(MILLI, max(memory, request.cores * MILLI // 100))


def fragmentation_score(
    scratch: NodeScratch, request: NvidiaRequest, choice: SetChoice, heavy: float | None
) -> NodeScore:
    """FGD's level of the fragmentation change, then the tie term (fragmentation.py)."""
    cpu = _policy_cpu(scratch, request)
    before = fragmentation(_shares_after(scratch, request, ()), request.workload, _cpu_free(cpu, request, placed=False))
    after_shares = _shares_after(scratch, request, choice.devices)
    after = fragmentation(after_shares, request.workload, _cpu_free(cpu, request, placed=True))
    delta = round(after - before, DELTA_DIGITS) + 0.0
    gpus = [d for d in scratch.devices.values() if d.vendor is Vendor.NVIDIA]
    pod = PodShape(
        cpu_milli=request.cpu_milli or 0,
        gpu_milli=sum(_share_milli(request, scratch.devices[i]) for i in choice.devices),
    )
    busy = any(not scratch.loads[d.index].idle for d in gpus)
    free_after = sum(s.milli for s in after_shares)
    tie_term = tie(pod, cpu, len(gpus), free_after, busy, heavy)
    frag_level = level(delta)
    return NodeScore(
        score=round(frag_level + tie_term, DIGITS),
        parts={"frag_delta": delta, "frag_level": float(frag_level), "tie": tie_term},
    )


def least_fragmenting(
    scratch: NodeScratch, request: NvidiaRequest, ordered: list[Device], table: PairTable, idle: set[int]
) -> Device:
    """For one shared GPU: the candidate with the best fragmentation level; among equals a GPU already
    shared before an idle one, then the idle GPU whose taking breaks the least idle link score (whole
    NVLink groups stay whole), then the GPU policy's device order (binpack fullest first, spread
    emptiest first, then index)."""
    cpu = _policy_cpu(scratch, request)
    before = fragmentation(_shares_after(scratch, request, ()), request.workload, _cpu_free(cpu, request, placed=False))
    cpu_after = _cpu_free(cpu, request, placed=True)

    def key(position: int) -> tuple[int, bool, int, int]:
        device = ordered[position]
        after = fragmentation(_shares_after(scratch, request, (device.index,)), request.workload, cpu_after)
        frag_level = level(round(after - before, DELTA_DIGITS))
        return (-frag_level, device.index in idle, cut(table, [device], idle), position)

    return ordered[min(range(len(ordered)), key=key)]
