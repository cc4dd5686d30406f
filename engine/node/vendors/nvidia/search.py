"""NVIDIA's default-mode set search: the best-connected set of usable GPUs (exact optimum,
ties broken to keep whole NVLink groups idle), per NUMA node when the pod asks for one.

Sets are found by the cheapest exact path the problem's size allows: a formula on uniform nodes,
lookup in a node's subset table (engine/node/search_table.py) once the topology's searches have paid
for building it, enumeration where the sets are few (engine/node/search_enumerate.py), else the
bounded branch-and-bound (engine/node/search.py). All answer by the same key; pair tables are kept
per wiring.
"""

from __future__ import annotations

import itertools
from math import comb

from engine.core.memo import BoundedCache
from engine.node.policy import NodeMeasures, NodePolicy
from engine.node.registry import VendorContext
from engine.node.search import SOLVED_BOUND, SearchResult, best_subset, problem_key
from engine.node.search_enumerate import enumerable, enumerate_best
from engine.node.search_table import TABLE_DEVICES, SubsetTable, table_best, uniform_best
from engine.node.vendor import (
    NodeScratch,
    SetCandidate,
    SetChoice,
    Unfit,
)
from engine.node.vendors.nvidia.links import PairTable, cut, pair_table
from engine.node.vendors.nvidia.request import (
    DEVICE_SPLIT_COUNT,
    GPU,
    NUMA_BIND,
    NvidiaRequest,
    assignment_of,
)
from schemas.topology import Device, Vendor

# Pair tables depend on the node's devices and links only: one per distinct topology.
PAIR_TABLE_BOUND = 1_024
# ~5 MB per 16-GPU topology once every request size was asked; a fleet has a few machine types.
TOPOLOGY_SETS_BOUND = 32
# A subset table costs about 0.07 us an entry to build (2^n entries: ~5 ms at 16 GPUs); walking C(g, k) sets
# about 0.05-0.3 us a set per chosen device. Until a topology's searches have paid for its table
# (TABLE_ENTRIES_PER_SEARCH entries a search: a 16-GPU node's waits for its 33rd search, a node of up to 11
# GPUs has it at the second), a problem whose walk is cheaper than building (C(g, k) * k <= 2^n) is walked.
# Both answer alike (the same sets, runners-up and counts), so which path a search took never shows.
TABLE_ENTRIES_PER_SEARCH = 2_048


class SetSearch:
    """The set search of one engine's NVIDIA plugin, and what it keeps: pair tables and subset tables per
    wiring, solved branch-and-bound and enumerated problems (all in the engine's memo, bounded)."""

    def __init__(self, context: VendorContext) -> None:
        self.memo = context.memo
        self.keys = context.keys
        self.limits = context.limits
        self._pair_tables: BoundedCache[tuple[int, int], PairTable] = self.memo.table(PAIR_TABLE_BOUND)
        self._topology_sets: BoundedCache[tuple[int, int], _TopologySets] = self.memo.table(TOPOLOGY_SETS_BOUND)
        self._solved: BoundedCache[tuple[object, ...], SearchResult] = self.memo.table(SOLVED_BOUND)
        # the same answers again, by the node's wiring and the problem's positions in its pair table
        self._searched: BoundedCache[tuple[object, ...], SearchResult] = self.memo.table(SOLVED_BOUND)

    def pair_table(self, scratch: NodeScratch) -> PairTable:
        node = scratch.node
        return self.memo.remembered(self._pair_tables, lambda: self.keys.wiring_key(node), lambda: _pairs(scratch))

    def best_sets(
        self, scratch: NodeScratch, table: PairTable, members: list[int], k: int, idle_positions: list[int] | None
    ) -> SearchResult:
        """The best k of `members` (pair-table positions, in preference order) by search.py's key.

        `idle_positions`: the node's idle GPUs whose links the remainder keeps (None: no remainder term).
        Unless the limits say otherwise, uniform nodes are answered by formula, nodes of at most TABLE_DEVICES
        GPUs by lookup once their table is built, few sets by enumeration; the rest by the bounded
        branch-and-bound, which is also the reference for all of them."""
        node = scratch.node
        if self.limits.table_search:
            sets = self.memo.remembered(
                self._topology_sets, lambda: self.keys.wiring_key(node), lambda: _TopologySets(table)
            )
            if sets.uniform is not None:
                idle = set(idle_positions or ())
                count = len(idle) if idle_positions is not None else None
                return uniform_best(sets.uniform, k, [p in idle for p in members], count)
            subsets = sets.table(len(members), k)
            if subsets is not None:
                idle_mask = sum(1 << p for p in idle_positions) if idle_positions is not None else None
                return table_best(subsets, k, members, idle_mask)
        # Keyed by positions in the wiring's pair table: O(g) to build where the weights are O(g^2)
        # (the branch-and-bound's own memo, by weights, then shares answers between wirings).
        return self.memo.remembered(
            self._searched,
            lambda: (self.keys.wiring_key(node), tuple(members), k, _frozen(idle_positions)),
            lambda: self._search(table, members, k, idle_positions),
        )

    def _search(self, table: PairTable, members: list[int], k: int, idle_positions: list[int] | None) -> SearchResult:
        if self.limits.table_search and (enumerable(len(members), k) or len(table.indices) <= TABLE_DEVICES):
            return enumerate_best(table.scores, members, k, idle_positions)
        weights = [[table.scores[p][q] for q in members] for p in members]
        if idle_positions is None:
            return self._best_subset(weights, k, None, None)
        idle = set(idle_positions)
        is_idle = [p in idle for p in members]
        cut_degree = [sum(table.scores[p][q] for q in idle_positions if q != p) if is_idle[x] else 0
                      for x, p in enumerate(members)]  # fmt: skip
        return self._best_subset(weights, k, cut_degree, is_idle)

    def _best_subset(
        self, weights: list[list[int]], k: int, cut_degree: list[int] | None, idle: list[bool] | None
    ) -> SearchResult:
        cap = self.limits.search_cap
        return self.memo.remembered(
            self._solved,
            lambda: problem_key(weights, k, cut_degree, idle, cap),
            lambda: best_subset(weights, k, cut_degree=cut_degree, idle=idle, cap=cap),
        )


def _frozen(positions: list[int] | None) -> tuple[int, ...] | None:
    return None if positions is None else tuple(positions)


def _pairs(scratch: NodeScratch) -> PairTable:
    gpus = tuple(d for d in scratch.devices.values() if d.vendor is Vendor.NVIDIA)
    return pair_table(gpus, scratch.links)


def usage_ratio(scratch: NodeScratch, device: Device) -> float:
    load = scratch.loads[device.index]
    cores = load.cores_used / device.cores if device.cores else 0.0
    memory = load.memory_used_mib / device.memory_mib if device.memory_mib else 0.0
    return load.pods / DEVICE_SPLIT_COUNT + cores + memory


def default_search(
    sets: SetSearch,
    scratch: NodeScratch,
    request: NvidiaRequest,
    candidates: tuple[Device, ...],
    table: PairTable,
    policy: NodePolicy,
    measures: NodeMeasures,
) -> SetChoice | Unfit:
    """`policy`: the request's node policy, which may rank the GPUs a one-GPU share could take (by `measures`)."""
    k = request.count
    # Device preference, the last tie-break: binpack = fullest first, spread = emptiest first.
    sign = -1.0 if request.binpack else 1.0
    ordered = sorted(candidates, key=lambda d: (sign * usage_ratio(scratch, d), d.index))
    idle = set(scratch.idle_indices(Vendor.NVIDIA))
    # Spreading shares is the user's explicit wish: the remainder term (idle GPUs only) would
    # pull shares onto busy GPUs, so it is left out there.
    protect = request.whole or request.binpack or request.topology or request.mutex
    if k == 1 and not request.whole:
        # A policy's device step (FGD's: which GPU takes a share changes the node's fragmentation);
        # whole idle GPUs are interchangeable to such a measure, so they keep the topology-aware choice.
        options = [(assignment_of(request, d),) for d in ordered]
        ranks = policy.device_ranks(measures, options)
        if ranks is not None:
            device = _best_ranked(ordered, ranks, table, idle)
            return _best_in_group(sets, scratch, request, [device], table, idle, protect)
    groups = _numa_groups(ordered) if request.numa_bind else [(None, ordered)]
    best: tuple[tuple[int, int, int], SetChoice] | None = None
    sizes: list[str] = []
    for numa, group in groups:
        sizes.append(f"NUMA {numa}: {len(group)}")
        if len(group) < k:
            continue
        choice = _best_in_group(sets, scratch, request, group, table, idle, protect)
        key = (int(choice.set_score), -int(choice.parts["remainder_loss"]), -(numa if numa is not None else -1))
        if best is None or key > best[0]:
            best = (key, choice)
    if best is None:
        return Unfit(
            reason=f"no NUMA node has {k} usable GPUs ({', '.join(sizes)}) and {NUMA_BIND} is set",
            summary=f"Insufficient {GPU} on one NUMA node",
        )
    return best[1]


def _best_ranked(ordered: list[Device], ranks: list[int], table: PairTable, idle: set[int]) -> Device:
    """The GPU the policy ranks best; among equals a GPU already shared before an idle one, then the idle
    GPU whose taking breaks the least idle link score (whole NVLink groups stay whole), then the GPU
    policy's device order (binpack fullest first, spread emptiest first, then index)."""

    def key(position: int) -> tuple[int, bool, int, int]:
        device = ordered[position]
        return (ranks[position], device.index in idle, cut(table, [device], idle), position)

    return ordered[min(range(len(ordered)), key=key)]


def _numa_groups(devices: list[Device]) -> list[tuple[int | None, list[Device]]]:
    keys = sorted({d.numa_node if d.numa_node is not None else -1 for d in devices})
    return [(key, [d for d in devices if (d.numa_node if d.numa_node is not None else -1) == key]) for key in keys]


def _best_in_group(
    sets: SetSearch,
    scratch: NodeScratch,
    request: NvidiaRequest,
    group: list[Device],
    table: PairTable,
    idle: set[int],
    protect: bool,
) -> SetChoice:
    k = request.count
    where = {index: p for p, index in enumerate(table.indices)}  # PairTable.position, one pass for all
    pos = [where[d.index] for d in group]
    idle_positions = [where[i] for i in sorted(idle)]
    result = sets.best_sets(scratch, table, pos, k, idle_positions if protect else None)
    chosen = sorted((group[p] for p in result.best.positions), key=lambda d: d.index)
    idle_before = _pair_sum(table, idle_positions)
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
        assignments=tuple(assignment_of(request, d) for d in chosen),
        set_score=float(result.best.internal),
        parts={
            "set_score": float(result.best.internal),
            "remainder_loss": float(result.best.cut if protect else cut(table, chosen, idle)),
            "idle_score_before": float(idle_before),
            "exact": 1.0 if result.exact else 0.0,
            "branches": float(result.expanded),
        },
        exact=result.exact,
        runners_up=runners,
        considered=result.expanded,
    )


class _TopologySets:
    """What the set search keeps per topology: whether every pair scores the same, and the subset table
    (built once the topology's searches have paid for it; never above TABLE_DEVICES)."""

    def __init__(self, pairs: PairTable) -> None:
        self.pairs = pairs
        values: set[int] = set(itertools.chain.from_iterable(pairs.scores))
        if len(values) <= 2:  # the diagonal's 0 and at most one other score: look off the diagonal alone
            values = set()
            for p, row in enumerate(pairs.scores):
                values.update(row[:p], row[p + 1 :])
        self.uniform: int | None = next(iter(values)) if len(values) == 1 else None
        self._table: SubsetTable | None = None
        self._searches = 0

    def table(self, g: int, k: int) -> SubsetTable | None:
        """The subset table for a search of k among g; None where there is none (above TABLE_DEVICES) or where,
        the table not yet paid for, walking the sets costs less than building it."""
        n = len(self.pairs.indices)
        if self._table is None and n <= TABLE_DEVICES:
            self._searches += 1
            paid = 1 << n <= TABLE_ENTRIES_PER_SEARCH * (self._searches - 1)
            if paid or comb(g, k) * k > 1 << n:
                self._table = SubsetTable(self.pairs.scores)
        return self._table


def _pair_sum(table: PairTable, positions: list[int]) -> int:
    """The pair-score sum of the devices at `positions` (PairTable.set_score, by position)."""
    rows = table.scores
    return sum(rows[p][q] for x, p in enumerate(positions) for q in positions[x + 1 :])


def _why_lost(best_internal: int, best_cut: int, internal: int, cut: int) -> str:
    if internal < best_internal:
        return f"pair-score sum {internal} < {best_internal}"
    if cut > best_cut:
        return f"same pair-score sum, breaks {cut} of idle link score (chosen set: {best_cut})"
    return "equal score; later in device order"
