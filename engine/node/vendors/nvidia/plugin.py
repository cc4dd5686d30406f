"""NVIDIA GPUs: HAMi's resources, annotations, filters and topology-aware choice.

Resources: nvidia.com/gpu (count), nvidia.com/gpumem (MiB per GPU),
nvidia.com/gpumem-percentage, nvidia.com/gpucores (percent per GPU).
A count alone takes whole GPUs (an idle GPU each). A memory or cores share
lets a GPU hold several pods while memory and cores fit (at most
DEVICE_SPLIT_COUNT pods, HAMi's default deviceSplitCount).

Annotations: hami.io/gpu-scheduler-policy (binpack | spread | topology-aware |
mutex | numa, or a comma list; default spread), hami.io/node-scheduler-policy
(binpack | spread | fragmentation; default binpack; fragmentation in default
mode only, see `node_score`), nvidia.com/use-gpuuuid,
nvidia.com/nouse-gpuuuid, nvidia.com/use-gputype, nvidia.com/nouse-gputype
(comma lists), nvidia.com/numa-bind (true: all GPUs on one NUMA node),
hami.io/device-scoring-weights (`slot=1,core=1,memory=1`: the weights of HAMi's
per-device usage score, hami mode).

Node annotation: hami.io/device-cordon (comma-separated GPU UUIDs an operator took
out of new allocations), honoured in every mode.
"""

from __future__ import annotations

import enum
from math import comb

from engine.core import cache
from engine.core.cache import BoundedCache
from engine.core.model import MILLI, Mode, PodRequest
from engine.core.node_key import wiring_key
from engine.core.quantities import optional_int, parse_bool, split_list
from engine.node import search_table
from engine.node.fragmentation import (
    DIGITS,
    FreeShare,
    NodeCpu,
    PodShape,
    fragmentation,
    heavy_ratio,
    level,
    node_cpu,
    tie,
)
from engine.node.search import DEFAULT_CAP, SearchResult, best_subset
from engine.node.search_table import TABLE_DEVICES, SubsetTable, table_best, uniform_best
from engine.node.vendor import (
    NODE_POLICY,
    DeviceRequest,
    NodePolicy,
    NodeScore,
    NodeScratch,
    Rejection,
    RequestError,
    SetCandidate,
    SetChoice,
    Unfit,
    parse_node_policy,
)
from engine.node.vendors.nvidia.links import PairTable, pair_table
from schemas import hami
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor

GPU = "nvidia.com/gpu"
GPUMEM = "nvidia.com/gpumem"
GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"
GPUCORES = "nvidia.com/gpucores"
GPU_POLICY = "hami.io/gpu-scheduler-policy"
USE_UUID = "nvidia.com/use-gpuuuid"
NOUSE_UUID = "nvidia.com/nouse-gpuuuid"
USE_TYPE = "nvidia.com/use-gputype"
NOUSE_TYPE = "nvidia.com/nouse-gputype"
NUMA_BIND = "nvidia.com/numa-bind"

CORDONED = f"cordoned by {hami.DEVICE_CORDON}"

DEVICE_SPLIT_COUNT = 10  # pods per GPU, HAMi's default deviceSplitCount
HAMI_WEIGHT = 10  # HAMi's util.Weight in its usage scores

# Node score weights (default mode), see docs/engine.md.
FILL_WEIGHT = 20.0  # one PCIe level is 10, one NVLink 100: packing never outweighs an NVLink
REMAINDER_WEIGHT = 10.0
# Fragmentation policy: the delta counts to 1/1000 of a milli-GPU before it is binned into levels.
DELTA_DIGITS = 3


class GpuPolicy(enum.StrEnum):
    BINPACK = "binpack"
    SPREAD = "spread"
    TOPOLOGY = "topology-aware"
    MUTEX = "mutex"
    NUMA = "numa"


class NvidiaRequest(DeviceRequest, frozen=True, kw_only=True):
    whole: bool  # no memory / cores share: whole, idle GPUs
    memory_mib: int = 0  # per GPU; 0 = not given
    memory_percent: int = 0  # per GPU; 0 = not given (100 when neither is given)
    cores: int = 100
    policies: tuple[GpuPolicy, ...] = (GpuPolicy.SPREAD,)
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    numa_bind: bool = False
    weights: hami.ScoringWeights = hami.DEFAULT_WEIGHTS  # hami.io/device-scoring-weights

    @property
    def reads_uuids(self) -> bool:
        return bool(self.use_uuids or self.nouse_uuids)

    @property
    def binpack(self) -> bool:
        return GpuPolicy.BINPACK in self.policies

    @property
    def topology(self) -> bool:
        return GpuPolicy.TOPOLOGY in self.policies

    @property
    def mutex(self) -> bool:
        return GpuPolicy.MUTEX in self.policies

    def memory_for(self, device: Device) -> int:
        """MiB this request takes on `device`."""
        if self.whole:
            return device.memory_mib
        if self.memory_mib > 0:
            return self.memory_mib
        return device.memory_mib * (self.memory_percent or 100) // 100


def _gpu_policies(text: str | None) -> tuple[GpuPolicy, ...]:
    if text is None:
        return (GpuPolicy.SPREAD,)
    names = split_list(text)
    if not names:
        raise RequestError(GPU_POLICY, "is empty")
    policies: list[GpuPolicy] = []
    for name in names:
        try:
            policies.append(GpuPolicy(name))
        except ValueError:
            allowed = ", ".join(p.value for p in GpuPolicy)
            raise RequestError(GPU_POLICY, f"unknown policy {name!r} (allowed: {allowed})") from None
    if GpuPolicy.BINPACK in policies and GpuPolicy.SPREAD in policies:
        raise RequestError(GPU_POLICY, "binpack and spread exclude each other")
    return tuple(policies)


def _scoring_weights(text: str | None) -> hami.ScoringWeights:
    if text is None:
        return hami.DEFAULT_WEIGHTS
    try:
        return hami.parse_scoring_weights(text)
    except ValueError as exc:
        raise RequestError(hami.SCORING_WEIGHTS, str(exc).removeprefix(f"{hami.SCORING_WEIGHTS}: ")) from None


NODE_POLICIES = (NodePolicy.BINPACK, NodePolicy.SPREAD, NodePolicy.FRAGMENTATION)


def _node_policy(text: str | None) -> NodePolicy:
    return parse_node_policy(text, NODE_POLICIES)


class NvidiaPlugin:
    vendor = Vendor.NVIDIA
    name = "nvidia"
    share_resources = (GPUMEM, GPUMEM_PERCENTAGE, GPUCORES)
    node_annotations_read = (hami.DEVICE_CORDON,)

    # --- request ------------------------------------------------------------------------

    def parse_request(self, request: PodRequest) -> NvidiaRequest | None:
        res = request.requests
        count = optional_int(res, GPU, low=0)
        memory = optional_int(res, GPUMEM, low=1)
        percent = optional_int(res, GPUMEM_PERCENTAGE, low=1, high=100)
        cores = optional_int(res, GPUCORES, low=0, high=100)
        if count is None:
            if memory is not None or percent is not None or cores is not None:
                raise RequestError(GPU, "is required with nvidia.com/gpumem, gpumem-percentage or gpucores")
            return None
        if count == 0:
            return None
        if memory is not None and percent is not None:
            raise RequestError(GPUMEM_PERCENTAGE, "cannot be combined with nvidia.com/gpumem")
        ann = request.annotations
        policies = _gpu_policies(ann.get(GPU_POLICY))
        numa = GpuPolicy.NUMA in policies or (NUMA_BIND in ann and parse_bool(NUMA_BIND, ann[NUMA_BIND]))
        whole = memory is None and percent is None and cores is None
        return NvidiaRequest(
            vendor=Vendor.NVIDIA,
            resource=GPU,
            count=count,
            node_policy=_node_policy(ann.get(NODE_POLICY)),
            device_noun="GPU",
            whole=whole,
            memory_mib=memory or 0,
            memory_percent=percent or 0,
            cores=100 if whole else (cores if cores is not None else 0),
            policies=policies,
            use_uuids=split_list(ann.get(USE_UUID, "")),
            nouse_uuids=split_list(ann.get(NOUSE_UUID, "")),
            use_types=split_list(ann.get(USE_TYPE, "")),
            nouse_types=split_list(ann.get(NOUSE_TYPE, "")),
            numa_bind=numa,
            weights=_scoring_weights(ann.get(hami.SCORING_WEIGHTS)),
        )

    def parse_host_request(self, request: PodRequest) -> NvidiaRequest | None:
        """A pod without GPUs under the fragmentation policy: scored by how its CPU changes the GPUs' use."""
        policy = _node_policy(request.annotations.get(NODE_POLICY))
        if policy is not NodePolicy.FRAGMENTATION:
            return None
        return NvidiaRequest(vendor=Vendor.NVIDIA, resource=GPU, count=0, node_policy=policy, whole=True)

    # --- filter -------------------------------------------------------------------------

    def filter_device(self, scratch: NodeScratch, request: DeviceRequest, device: Device) -> str | Rejection | None:
        assert isinstance(request, NvidiaRequest)
        if not device.healthy:
            return "unhealthy"
        type_reason = _type_mismatch(request, device)
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
        table = _node_pair_table(scratch)
        for note in table.notes:
            scratch.warn(note)
        if scratch.mode is Mode.HAMI:
            return _hami_search(scratch, request, candidates, table)
        return _default_search(scratch, request, candidates, table)

    # --- node score ---------------------------------------------------------------------

    def node_score(self, scratch: NodeScratch, request: DeviceRequest, choice: SetChoice) -> NodeScore:
        assert isinstance(request, NvidiaRequest)
        if scratch.mode is Mode.HAMI:
            usage = _hami_node_usage(scratch)
            score = usage if request.node_policy is NodePolicy.BINPACK else 3 * HAMI_WEIGHT - usage
            return NodeScore(score=round(score, 6), parts={"hami_usage": round(usage, 6)})
        if _fragmentation_applies(request):
            return _fragmentation_score(scratch, request, choice)
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


# Pair tables depend on the node's devices and links only: one per distinct topology.
PAIR_TABLE_BOUND = 1_024
_pair_tables: BoundedCache[tuple[int, int], PairTable] = BoundedCache(PAIR_TABLE_BOUND)


def _node_pair_table(scratch: NodeScratch) -> PairTable:
    return cache.remembered(_pair_tables, lambda: wiring_key(scratch.node), lambda: _build_pair_table(scratch))


def _build_pair_table(scratch: NodeScratch) -> PairTable:
    gpus = tuple(d for d in scratch.devices.values() if d.vendor is Vendor.NVIDIA)
    return pair_table(gpus, scratch.links)


def _type_mismatch(request: NvidiaRequest, device: Device) -> str:
    model = device.model.upper()
    if request.use_types and not any(t.upper() in model for t in request.use_types):
        return f"type {device.model!r} not in {USE_TYPE}"
    if any(t.upper() in model for t in request.nouse_types):
        return f"type {device.model!r} excluded by {NOUSE_TYPE}"
    return ""


def _assignment(request: NvidiaRequest, device: Device) -> DeviceAssignment:
    if request.whole:
        return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=0, cores=100)
    return DeviceAssignment(
        index=device.index, uuid=device.uuid, memory_mib=request.memory_for(device), cores=request.cores
    )


def _usage_ratio(scratch: NodeScratch, device: Device) -> float:
    load = scratch.loads[device.index]
    cores = load.cores_used / device.cores if device.cores else 0.0
    memory = load.memory_used_mib / device.memory_mib if device.memory_mib else 0.0
    return load.pods / DEVICE_SPLIT_COUNT + cores + memory


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


# --- fragmentation policy -------------------------------------------------------------------


def _fragmentation_applies(request: NvidiaRequest) -> bool:
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


def _fragmentation_score(scratch: NodeScratch, request: NvidiaRequest, choice: SetChoice) -> NodeScore:
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
    tie_term = tie(pod, cpu, len(gpus), free_after, busy, heavy_ratio(request.workload))
    frag_level = level(delta)
    return NodeScore(
        score=round(frag_level + tie_term, DIGITS),
        parts={"frag_delta": delta, "frag_level": float(frag_level), "tie": tie_term},
    )


def _least_fragmenting(
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
        return (-frag_level, device.index in idle, _cut(table, [device], idle), position)

    return ordered[min(range(len(ordered)), key=key)]


# --- default mode ---------------------------------------------------------------------------


def _default_search(
    scratch: NodeScratch, request: NvidiaRequest, candidates: tuple[Device, ...], table: PairTable
) -> SetChoice | Unfit:
    k = request.count
    # Device preference, the last tie-break: binpack = fullest first, spread = emptiest first.
    sign = -1.0 if request.binpack else 1.0
    ordered = sorted(candidates, key=lambda d: (sign * _usage_ratio(scratch, d), d.index))
    idle = set(scratch.idle_indices(Vendor.NVIDIA))
    # Spreading shares is the user's explicit wish: the remainder term (idle GPUs only) would
    # pull shares onto busy GPUs, so it is left out there.
    protect = request.whole or request.binpack or request.topology or request.mutex
    if k == 1 and not request.whole and _fragmentation_applies(request):
        # FGD's device step: which GPU takes a share changes the node's fragmentation; whole idle
        # GPUs are interchangeable to the measure, so they keep the topology-aware choice.
        device = _least_fragmenting(scratch, request, ordered, table, idle)
        return _best_in_group(scratch, request, [device], table, idle, protect)
    groups = _numa_groups(ordered) if request.numa_bind else [(None, ordered)]
    best: tuple[tuple[int, int, int], SetChoice] | None = None
    sizes: list[str] = []
    for numa, group in groups:
        sizes.append(f"NUMA {numa}: {len(group)}")
        if len(group) < k:
            continue
        choice = _best_in_group(scratch, request, group, table, idle, protect)
        key = (int(choice.set_score), -int(choice.parts["remainder_loss"]), -(numa if numa is not None else -1))
        if best is None or key > best[0]:
            best = (key, choice)
    if best is None:
        return Unfit(
            reason=f"no NUMA node has {k} usable GPUs ({', '.join(sizes)}) and {NUMA_BIND} is set",
            summary="Insufficient nvidia.com/gpu on one NUMA node",
        )
    return best[1]


def _numa_groups(devices: list[Device]) -> list[tuple[int | None, list[Device]]]:
    keys = sorted({d.numa_node if d.numa_node is not None else -1 for d in devices})
    return [(key, [d for d in devices if (d.numa_node if d.numa_node is not None else -1) == key]) for key in keys]


def _best_in_group(
    scratch: NodeScratch,
    request: NvidiaRequest,
    group: list[Device],
    table: PairTable,
    idle: set[int],
    protect: bool,
) -> SetChoice:
    k = request.count
    pos = [table.position(d.index) for d in group]
    idle_positions = [table.position(i) for i in sorted(idle)]
    result = _search_sets(scratch, table, pos, k, idle_positions if protect else None)
    chosen = sorted((group[p] for p in result.best.positions), key=lambda d: d.index)
    idle_before = table.set_score(sorted(idle))
    if not result.exact:
        scratch.warn(f"search bound hit after {result.expanded} branches: best set found, not proven optimal")
    runners = tuple(
        SetCandidate(
            devices=tuple(sorted(group[p].index for p in found.positions)),
            score=float(found.internal),
            why=_why_lost(result.best.internal, result.best.cut, found.internal, found.cut),
        )
        for found in result.runners_up
    )
    return SetChoice(
        assignments=tuple(_assignment(request, d) for d in chosen),
        set_score=float(result.best.internal),
        parts={
            "set_score": float(result.best.internal),
            "remainder_loss": float(result.best.cut if protect else _cut(table, chosen, idle)),
            "idle_score_before": float(idle_before),
            "exact": 1.0 if result.exact else 0.0,
            "branches": float(result.expanded),
        },
        exact=result.exact,
        runners_up=runners,
        considered=result.expanded,
    )


class _TopologySets:
    """What the set search keeps per topology: whether every pair scores the same, and the subset table."""

    def __init__(self, pairs: PairTable) -> None:
        self.pairs = pairs
        values = {score for p, row in enumerate(pairs.scores) for q, score in enumerate(row) if q != p}
        self.uniform: int | None = next(iter(values)) if len(values) == 1 else None
        self._table: SubsetTable | None = None  # built on first need: uniform nodes never need it

    def table(self) -> SubsetTable:
        if self._table is None:
            self._table = SubsetTable(self.pairs.scores)
        return self._table


# ~5 MB per 16-GPU topology once every request size was asked; a fleet has a few machine types.
TOPOLOGY_SETS_BOUND = 32
_topology_sets: BoundedCache[tuple[int, int], _TopologySets] = BoundedCache(TOPOLOGY_SETS_BOUND)


def _search_sets(
    scratch: NodeScratch, table: PairTable, members: list[int], k: int, idle_positions: list[int] | None
) -> SearchResult:
    """The best k of `members` (pair-table positions, in preference order) by search.py's key.

    `idle_positions`: the node's idle GPUs whose links the remainder keeps (None: no remainder term).
    Uniform nodes and nodes of at most TABLE_DEVICES GPUs are answered by lookup (search_table.py);
    larger ones by the bounded branch-and-bound, which is also the reference for both."""
    if search_table.fast_enabled():
        sets = cache.remembered(_topology_sets, lambda: wiring_key(scratch.node), lambda: _TopologySets(table))
        if sets.uniform is not None:
            idle = set(idle_positions or ())
            count = len(idle) if idle_positions is not None else None
            return uniform_best(sets.uniform, k, [p in idle for p in members], count)
        if len(table.indices) <= TABLE_DEVICES:
            idle_mask = sum(1 << p for p in idle_positions) if idle_positions is not None else None
            return table_best(sets.table(), k, members, idle_mask)
    weights = [[table.scores[p][q] for q in members] for p in members]
    if idle_positions is None:
        return best_subset(weights, k, cap=DEFAULT_CAP)
    idle = set(idle_positions)
    is_idle = [p in idle for p in members]
    cut_degree = [sum(table.scores[p][q] for q in idle_positions if q != p) if is_idle[x] else 0
                  for x, p in enumerate(members)]  # fmt: skip
    return best_subset(weights, k, cut_degree=cut_degree, idle=is_idle, cap=DEFAULT_CAP)


def _cut(table: PairTable, chosen: list[Device], idle: set[int]) -> int:
    members = {d.index for d in chosen}
    return sum(table.score(a, b) for a in sorted(members & idle) for b in sorted(idle - members))


def _why_lost(best_internal: int, best_cut: int, internal: int, cut: int) -> str:
    if internal < best_internal:
        return f"pair-score sum {internal} < {best_internal}"
    if cut > best_cut:
        return f"same pair-score sum, breaks {cut} of idle link score (chosen set: {best_cut})"
    return "equal score; later in device order"


# --- hami mode ------------------------------------------------------------------------------


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


def _hami_search(
    scratch: NodeScratch, request: NvidiaRequest, candidates: tuple[Device, ...], table: PairTable
) -> SetChoice | Unfit:
    usable = {d.index for d in candidates}
    k = request.count
    picked: list[Device] = []
    prev_numa: int | None = None
    walked = 0
    for device in hami_walk_order(scratch, request):
        # HAMi checks health and type before the NUMA reset, the rest after it.
        if not device.healthy or _type_mismatch(request, device):
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
            summary="Insufficient nvidia.com/gpu",
        )
    if len(picked) == k:
        return _hami_choice(request, picked, table, walked)
    if k == 1:
        return _hami_choice(request, [_hami_worst_single(picked, table)], table, walked)
    result = _search_sets(scratch, table, [table.position(d.index) for d in picked], k, None)
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
        assignments=tuple(_assignment(request, d) for d in chosen),
        set_score=float(score),
        parts={"set_score": float(score), "exact": 1.0 if exact else 0.0},
        exact=exact,
        considered=considered,
    )


def _hami_node_usage(scratch: NodeScratch) -> float:
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


plugin = NvidiaPlugin()
