"""A gang of 64 pods x 8 GPUs on 10,000 realistic nodes under about 10,000 hypernodes in 4 tiers.

The network tree: tier 1 ToRs of 1-2 nodes (7,500), tier 2 leaves of about 5 nodes
(2,000), tier 3 spines of about 22 nodes (450), tier 4 superspines of 200 nodes (50):
the sizes of the engine's own large-tree test, laid out over consecutive nodes. Built
once with `build_tree`, outside the timing (its build time is reported apart).

The cluster: blocks of 200 nodes (one superspine each) cycle through 20 %, 35 % and 50 %
entirely idle nodes, the rest half busy; so a 64-member gang of 8-GPU pods fits under
some superspines and not others, and under no lower hypernode.

- `place_gang` (the engine): timed cold (a new engine, a new index) and warm (a
  stream of gangs on one index, each gang's members applied to their nodes and upserted,
  the oldest gang leaving once three are placed).
- Volcano's gradient search, reimplemented plainly (volcano-sh/volcano, the allocate
  action with network topology): for each tier from the lowest, for each hypernode of
  the tier, dry-run every member on the hypernode's nodes with the engine's per-pod
  decision (`place_in` over an index of those nodes, each member applied before the
  next); the first tier where some hypernode holds every member wins, and among its
  hypernodes the highest summed member score (then the name). Timed on the same states
  as the first warm gangs.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import msgspec
import numpy as np

from bench.realistic_cluster import gpu_pod, realistic_nodes, with_pod, without_pod
from engine import ClusterIndex, Decision, Engine, Mode, NodeState, PodRequest
from engine.cluster.network import HyperNode, NetworkTree, build_tree
from engine.core.hypernodes import HyperNodeSpec, Member, MemberType, ObjectMeta, exact_member
from engine.decide.gang import GangDecision, GangRequest

TIER_SIZES = (7_500, 2_000, 450, 50)  # tiers 1..4, for 10,000 nodes
IDLE_BY_BLOCK = ((200, 0.20), (200, 0.35), (200, 0.50))  # share of entirely idle nodes per superspine
GANG_PODS, GANG_GPUS = 64, 8
LIVE_GANGS = 3
P999_GANGS = 50  # warm gangs a p99.9 is reported over


class GangSettings(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int = 10_000
    warm: int = 10  # gangs timed in the warm stream
    cold: int = 2
    volcano: int = 2  # warm states on which the Volcano-style search is timed too
    pods: int = GANG_PODS
    seed: int = 0


class GangScaleRun(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    hypernodes: int
    tiers: int
    pods: int
    tree_build_ms: float
    warm_ms: tuple[float, ...]
    cold_ms: tuple[float, ...]
    volcano_ms: tuple[float, ...]
    placed: int  # warm gangs placed
    tiers_used: tuple[int | None, ...]  # the engine's tier per warm gang
    volcano_tiers: tuple[int | None, ...]  # the baseline's tier on the same states
    volcano_hypernodes_tried: int  # hypernodes dry-run, summed over the baseline's runs

    def p99(self, which: str) -> float | None:
        values: tuple[float, ...] = getattr(self, which)
        return float(np.percentile(values, 99)) if values else None

    def p999(self, which: str) -> float | None:
        """The 99.9th percentile; None below P999_GANGS values (it would be the maximum of a few)."""
        values: tuple[float, ...] = getattr(self, which)
        return float(np.percentile(values, 99.9)) if len(values) >= P999_GANGS else None


def hypernode_tree(nodes: list[str], tier_sizes: tuple[int, ...]) -> list[HyperNode]:
    """Consecutive children under each hypernode, tier by tier (tier 1 holds nodes)."""
    hypernodes: list[HyperNode] = []
    below: list[str] = nodes
    kind: MemberType = "Node"
    for tier, size in enumerate(tier_sizes, start=1):
        size = min(size, len(below))
        names = [f"t{tier}-{k:05d}" for k in range(size)]
        members: list[list[Member]] = [[] for _ in names]
        for k, child in enumerate(below):
            members[k * size // len(below)].append(exact_member(kind, child))
        hypernodes += [
            HyperNode(metadata=ObjectMeta(name=name), spec=HyperNodeSpec(tier=tier, members=tuple(m)))
            for name, m in zip(names, members, strict=True)
        ]
        below, kind = names, "HyperNode"
    return hypernodes


def scaled_tiers(nodes: int) -> tuple[int, ...]:
    """TIER_SIZES for 10,000 nodes, scaled for a smaller cluster (tests)."""
    return tuple(max(1, size * nodes // 10_000) for size in TIER_SIZES)


def gang_request(name: str, pods: int) -> GangRequest:
    members = tuple(gpu_pod(f"{name}-{k:03d}", GANG_GPUS, name=f"{name}-worker-{k:03d}") for k in range(pods))
    return GangRequest(name=name, min_member=pods, pods=members)


def _ms(started: float) -> float:
    return 1000.0 * (time.perf_counter() - started)


def _member_decision(index: ClusterIndex, gang: GangDecision) -> list[tuple[str, str, Decision]]:
    return [
        (p.uid, p.node, Decision(node=p.node, devices=p.devices, score=p.score))
        for p in gang.pods
        if p.node is not None and not p.running
    ]


def apply_gang(index: ClusterIndex, decision: GangDecision) -> list[tuple[str, str]]:
    placed = []
    for uid, node, member in _member_decision(index, decision):
        index.upsert(with_pod(index.node(node), member, uid))
        placed.append((uid, node))
    return placed


class VolcanoResult(msgspec.Struct, frozen=True, kw_only=True):
    hypernode: str | None
    tier: int | None
    hypernodes_tried: int


def volcano_gradient_search(
    placer: Engine, index: ClusterIndex, tree: NetworkTree, gang: GangRequest, mode: Mode = Mode.DEFAULT
) -> VolcanoResult:
    """Every hypernode of a tier dry-run by `placer`, lowest tier first; the first tier with a success wins."""
    tried = 0
    for tier in tree.tiers:
        found: list[tuple[float, str]] = []
        for hypernode in tree.hypernodes_at(tier):
            tried += 1
            score = _dry_run(placer, index, tree.nodes_under(hypernode), gang.pods, mode)
            if score is not None:
                found.append((-score, hypernode))
        if found:
            return VolcanoResult(hypernode=min(found)[1], tier=tier, hypernodes_tried=tried)
    return VolcanoResult(hypernode=None, tier=None, hypernodes_tried=tried)


def _dry_run(
    placer: Engine, index: ClusterIndex, names: tuple[str, ...], pods: tuple[PodRequest, ...], mode: Mode
) -> float | None:
    """The members' summed score when all of them fit on `names`, one after the other; None when one does not."""
    local = placer.new_index()
    for name in names:
        node = index.get(name)
        if node is not None:
            local.upsert(node)
    total = 0.0
    for pod in pods:
        decision = placer.place_in(local, pod, mode)
        if decision.node is None:
            return None
        local.upsert(with_pod(local.node(decision.node), decision, pod.uid))
        total += decision.score
    return total


def _nothing() -> None:
    return None


def measure(
    settings: GangSettings, mode: Mode = Mode.DEFAULT, *, settle: Callable[[], None] = _nothing
) -> GangScaleRun:
    """`settle`: called once the warm index is built and has placed its first gang (the bench passes the
    placer's `freeze_long_lived`, as the placer calls it once its view is built)."""
    nodes: list[NodeState] = realistic_nodes(settings.nodes, settings.seed, idle_by_block=IDLE_BY_BLOCK)
    names = [n.name for n in nodes]
    hypernodes = hypernode_tree(names, scaled_tiers(settings.nodes))
    started = time.perf_counter()
    tree = build_tree(hypernodes, {n.name: n.labels for n in nodes}).tree
    tree_build_ms = _ms(started)

    cold_ms = []
    for j in range(settings.cold):
        placer = Engine()
        index = placer.new_index()
        for node in nodes:
            index.upsert(node)
        started = time.perf_counter()
        placer.place_gang(index, tree, gang_request(f"cold-{j}", settings.pods), mode)
        cold_ms.append(_ms(started))

    placer = Engine()
    index = placer.new_index()
    for node in nodes:
        index.upsert(node)
    live: deque[list[tuple[str, str]]] = deque()
    # One untimed gang first: the engine meets every node state once (that is the cold figure);
    # warm is the steady state of a placer whose cluster changes a few nodes per decision.
    placer.place_gang(index, tree, gang_request("warm-up", settings.pods), mode)
    settle()
    warm_ms: list[float] = []
    volcano_ms: list[float] = []
    tiers_used: list[int | None] = []
    volcano_tiers: list[int | None] = []
    tried = 0
    placed = 0
    for j in range(settings.warm):
        gang = gang_request(f"gang-{j:03d}", settings.pods)
        started = time.perf_counter()
        decision = placer.place_gang(index, tree, gang, mode)
        warm_ms.append(_ms(started))
        tiers_used.append(decision.tier)
        if j < settings.volcano:
            started = time.perf_counter()
            baseline = volcano_gradient_search(placer, index, tree, gang, mode)
            volcano_ms.append(_ms(started))
            volcano_tiers.append(baseline.tier)
            tried += baseline.hypernodes_tried
        if decision.placed:
            placed += 1
            live.append(apply_gang(index, decision))
        if len(live) > LIVE_GANGS:
            for uid, name in live.popleft():
                index.upsert(without_pod(index.node(name), uid))
    return GangScaleRun(
        nodes=settings.nodes,
        hypernodes=len(hypernodes),
        tiers=len(scaled_tiers(settings.nodes)),
        pods=settings.pods,
        tree_build_ms=tree_build_ms,
        warm_ms=tuple(warm_ms),
        cold_ms=tuple(cold_ms),
        volcano_ms=tuple(volcano_ms),
        placed=placed,
        tiers_used=tuple(tiers_used),
        volcano_tiers=tuple(volcano_tiers),
        volcano_hypernodes_tried=tried,
    )
