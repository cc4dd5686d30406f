"""A gang's decision: every pending member placed inside the lowest network domain that holds them all.

    resolve the constraint     hard: never above the allowed tier; soft (or none): prefer low tiers
    slots per node             how many members of each shape a node takes: its device class answered
                               again and again (memoised per class), capped by the node's free resources
                               and its node rules; summed per hypernode in one pass over the tree
    the tier walk              from the lowest tier up: the hypernodes of the tier whose slots cover every
                               shape (Volcano's gradient search, pruned by the aggregate); the first tier
                               with a feasible hypernode ends the walk
    a plan per candidate       members fill the candidate's nodes child domain by child domain (the
                               fullest first, so members share low hypernodes); subgroups each find the
                               smallest domain within their own tier limit
    the best candidate         the highest summed device score of the members (link quality, then what
                               the sets leave whole), then the tightest fit (fewest free slots left:
                               Volcano's binpack), then the name — deterministic, never random

Members already running (a restarted or partly bound gang) are never placed again: the
search stays inside the highest allowed ancestor of the hypernode they occupy, so the
answer depends only on what the cluster says, not on the placer's memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine.cluster.index import ClusterIndex, class_state
from engine.cluster.network import NetworkTree, aggregate
from engine.core import cache
from engine.core.cache import BoundedCache
from engine.core.model import Allocation, Mode, NodeState, PodRequest, WorkloadClass
from engine.decide.kube.messages import fit_error_message
from engine.decide.node_rules import PodRules, node_facts
from engine.decide.pod import NO_DEVICES, Claim, claim
from engine.node import answer as node_answer
from engine.node.answer import NodeFit, request_id_of
from engine.node.vendor import RequestError, VendorRegistry
from schemas.events import DeviceAssignment, NetworkConstraint, SubGroupPolicy, TopologyMode

MAX_PLANNED = 8  # candidate hypernodes of one tier planned in full; the rest are pruned by slots
SLOT_BOUND = 16_384


class GangRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A gang as the engine reads it: its members (running ones carry `node_name`) and its constraints."""

    name: str
    min_member: int = 1
    network: NetworkConstraint | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    pods: tuple[PodRequest, ...]


class MemberPlacement(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    uid: str
    node: str | None = None  # None: not placed (the gang is not placed)
    devices: tuple[DeviceAssignment, ...] = ()
    score: float = 0.0
    score_parts: dict[str, float] = {}
    running: bool = False  # already on its node before this decision
    qos: str = ""
    app_class: str = ""


class GangDecision(msgspec.Struct, frozen=True, kw_only=True):
    gang: str
    placed: bool
    hypernode: str | None = None  # the lowest hypernode holding every member
    tier: int | None = None
    pods: tuple[MemberPlacement, ...] = ()
    reason: str = ""
    hypernodes_planned: int = 0  # candidates planned in full (the rest were pruned by their slots)


# --- one shape of member ---------------------------------------------------------------------


class _Shape:
    """Members that ask for the same thing: one request read once, its fits per device class remembered."""

    def __init__(self, key: bytes, request: PodRequest, pod_claim: Claim, rules: PodRules, mode: Mode) -> None:
        self.key = key
        self.request = request
        self.claim = pod_claim
        self.rules = rules
        self.mode = mode
        self.members: list[PodRequest] = []
        plugin, device_request = pod_claim.plugin, pod_claim.request
        self.request_id = request_id_of(plugin, device_request, mode) if plugin and device_request else None
        self.resources = {r: v for r, v in rules.facts.requests.items() if v > 0}

    def class_fits(self, index: ClusterIndex, class_id: int, node: NodeState, cap: int) -> _Fits:
        """The successive answers for up to `cap` members on one node of this class (each after the last),
        and why the first member does not fit when none does."""
        plugin, device_request = self.claim.plugin, self.claim.request
        if plugin is None or device_request is None:
            return _Fits(fits=(NO_DEVICES,) * cap)
        key = None
        if self.request_id is not None and not device_request.reads_uuids:
            key = (self.request_id, class_id, cap)
            found = _slots.get(key)
            if found is not None:
                return found
        state = class_state(node, index.reads) if key is not None else node
        fits: list[NodeFit] = []
        miss = ""
        while len(fits) < cap:
            answer = node_answer.evaluate(plugin, device_request, state, self.mode)
            if not isinstance(answer, NodeFit):
                miss = answer.unfit.summary
                break
            fits.append(answer)
            state = msgspec.structs.replace(state, allocations=state.allocations + _held(answer, device_request))
        out = _Fits(fits=tuple(fits), miss=miss if not fits else "")
        if key is not None:
            _slots.put(key, out)
        return out

    def resource_slots(self, node: NodeState, cap: int) -> int:
        """Members the node's free resources and pod count still take (all of them when not reported)."""
        if node.allocatable is None:
            return cap
        facts = node_facts(node)
        allocatable = facts.allocatable or {}
        free = allocatable.get("pods", 0) - facts.pod_count * 1000
        slots = min(cap, max(0, free // 1000))
        for resource, amount in self.resources.items():
            if resource in ("pods",):
                continue
            room = allocatable.get(resource, 0) - facts.requested.get(resource, 0)
            slots = min(slots, max(0, room // amount))
        return slots


class _Fits(msgspec.Struct, frozen=True, kw_only=True):
    fits: tuple[NodeFit, ...]
    miss: str = ""  # kube-style summary when no member fits


_slots: BoundedCache[tuple[int, int, int], _Fits] = BoundedCache(SLOT_BOUND)


def _held(fit: NodeFit, device_request: object) -> tuple[Allocation, ...]:
    qos = getattr(device_request, "qos", "")
    app_class = getattr(device_request, "app_class", "")
    return tuple(
        Allocation(pod_uid="", index=a.index, memory_mib=a.memory_mib, cores=a.cores, qos=qos, app_class=app_class)
        for a in fit.choice.assignments
    )


def _shape_key(request: PodRequest) -> bytes:
    return msgspec.json.encode(
        (request.requests, request.annotations, request.node_selector, request.affinity, request.tolerations)
    )


# --- the decision ----------------------------------------------------------------------------


class _Plan(msgspec.Struct, frozen=True, kw_only=True):
    hypernode: str
    assignments: tuple[tuple[str, str, int], ...]  # (member uid, node, fit number on that node)
    score: float
    free_after: int


def place_gang(
    registry: VendorRegistry,
    index: ClusterIndex,
    tree: NetworkTree,
    gang: GangRequest,
    mode: Mode = Mode.DEFAULT,
    *,
    workload: tuple[WorkloadClass, ...] = (),
) -> GangDecision:
    """Every pending member of `gang` placed inside one network domain, or none (with the reason).

    Raises RequestError(field, reason) for a member or constraint that cannot be read."""
    pending = sorted((p for p in gang.pods if not p.node_name), key=lambda p: (p.name, p.uid))
    running = [p for p in gang.pods if p.node_name]
    if not pending:
        return _decision(gang, tree, index, [], {}, running, placed=True, reason="every member is running")
    mode_hard, max_tier = _limit(tree, gang.network, "network")
    shapes = _shapes(registry, pending, mode, workload)
    pin = _pin(tree, running, mode_hard, max_tier)
    per_node, fits, misses = _node_slots(index, tree, shapes)
    totals = {key: aggregate(tree, values) for key, values in per_node.items()}
    need = {shape.key: len(shape.members) for shape in shapes}
    planned = 0
    for tier in tree.tiers:
        if mode_hard and tier > max_tier:
            break
        if pin.lca is not None and tier < tree.tier_of(pin.lca):
            continue
        candidates = _candidates(tree, tier, pin, totals, need)
        if not candidates:
            continue
        plans: list[_Plan] = []
        for hypernode in candidates[:MAX_PLANNED]:
            planned += 1
            plan = _plan(tree, hypernode, shapes, per_node, fits, gang.sub_groups, pin.lca)
            if plan is not None:
                plans.append(plan)
        if plans:
            best = min(plans, key=lambda p: (-p.score, p.free_after, p.hypernode))
            return _placed(gang, tree, index, shapes, best, fits, running, planned)
    allowed_tiers = [t for t in tree.tiers if not mode_hard or t <= max_tier]
    best_slots = max((_most_slots(tree, t, totals, need) for t in allowed_tiers), default=0)
    reason = _why_not(index, gang, misses, mode_hard, max_tier, best_slots, need)
    return _decision(gang, tree, index, pending, {}, running, placed=False, reason=reason, planned=planned)


def _limit(tree: NetworkTree, network: NetworkConstraint | None, field: str) -> tuple[bool, int]:
    """(hard, highest tier allowed); no constraint = soft up to the top of the tree."""
    top = tree.tiers[-1]
    if network is None:
        return False, top
    highest = top
    if network.highest_tier is not None:
        highest = network.highest_tier
    elif network.highest_tier_name:
        try:
            highest = tree.tier_named(network.highest_tier_name)
        except KeyError:
            known = ", ".join(sorted(tree.tier_names)) or "none"
            reason = f"no tier is named {network.highest_tier_name!r} (known: {known})"
            raise RequestError(f"{field}.highestTierName", reason) from None
    return network.mode is TopologyMode.HARD, highest


def _shapes(
    registry: VendorRegistry, pending: list[PodRequest], mode: Mode, workload: tuple[WorkloadClass, ...]
) -> list[_Shape]:
    by_key: dict[bytes, _Shape] = {}
    for pod in pending:
        key = _shape_key(pod)
        shape = by_key.get(key)
        if shape is None:
            try:
                pod_claim = claim(registry, pod, mode, workload)
                rules = PodRules(pod, registry.share_resources)
            except RequestError as exc:
                raise RequestError(f"pods[{pod.name}].{exc.field}", exc.reason) from None
            shape = by_key[key] = _Shape(key, pod, pod_claim, rules, mode)
        shape.members.append(pod)
    return sorted(by_key.values(), key=lambda s: (-len(s.members), s.members[0].name))


class _Pin(msgspec.Struct, frozen=True, kw_only=True):
    """Where running members pin the gang: their lowest common hypernode, and the domain allowed around it."""

    lca: str | None = None
    domain: str | None = None


def _pin(tree: NetworkTree, running: Sequence[PodRequest], hard: bool, max_tier: int) -> _Pin:
    nodes = [p.node_name for p in running if tree.is_node(p.node_name)]
    if not nodes:
        return _Pin()
    lca = tree.lca(nodes)
    if not hard:
        return _Pin(lca=lca)
    if tree.tier_of(lca) > max_tier:
        return _Pin(lca=lca, domain=lca)  # already spread past the limit: stay where they are
    domain = tree.ancestor_at_tier(nodes[0], max_tier)
    return _Pin(lca=lca, domain=domain if domain is not None else lca)


class _NodeSlots(msgspec.Struct, frozen=True):
    node: NodeState  # held, so the identity the memo is keyed by stays this node's
    fits: tuple[NodeFit, ...]
    misses: tuple[str, ...]  # kube-style reasons when it takes none


# Per shape and node state (by identity): what the node takes. A gang decision asks every node of
# the tree; between two decisions only the nodes that changed are worked out again.
NODE_SLOTS_BOUND = 65_536
_node_slots_memo: BoundedCache[tuple[bytes, int], _NodeSlots] = BoundedCache(NODE_SLOTS_BOUND, recency=False)


def _slots_of(index: ClusterIndex, shape: _Shape, node: NodeState, cap: int) -> _NodeSlots:
    """What the node takes of the shape (at most `cap` members), worked out afresh."""
    failure = shape.rules.failure(node)
    if failure is not None:
        return _NodeSlots(node, (), tuple(failure))
    room = shape.resource_slots(node, cap)
    answered = shape.class_fits(index, index.class_id(node.name), node, room) if room else _Fits(fits=())
    return _NodeSlots(node, answered.fits, (answered.miss,) if answered.miss and not answered.fits else ())


def _node_slots(
    index: ClusterIndex, tree: NetworkTree, shapes: list[_Shape]
) -> tuple[dict[bytes, list[int]], dict[tuple[bytes, str], tuple[NodeFit, ...]], list[str]]:
    """Per shape, the members each tree node takes (in tree order), the fits behind them, and for the
    first shape every node's reason when it takes none (kube-scheduler's summaries)."""
    per_node: dict[bytes, list[int]] = {}
    fits: dict[tuple[bytes, str], tuple[NodeFit, ...]] = {}
    misses: list[str] = []
    get = index.get
    nodes = [get(name) for name in tree.nodes]
    remembered = cache.enabled()
    for number, shape in enumerate(shapes):
        cap = len(shape.members)
        prefix = shape.key + cap.to_bytes(4, "little")
        keys = [(prefix, id(node)) for node in nodes]
        found = _node_slots_memo.get_many(keys) if remembered else [None] * len(keys)
        values: list[int] = []
        append = values.append
        for name, node, key, hit in zip(tree.nodes, nodes, keys, found, strict=True):
            if node is None:
                append(0)
                if number == 0:
                    misses.append("node(s) were not found")
                continue
            if hit is None or hit.node is not node:
                hit = _slots_of(index, shape, node, cap)
                if remembered:
                    _node_slots_memo.put(key, hit)
            if hit.fits:
                fits[(shape.key, name)] = hit.fits
            elif number == 0:
                misses.extend(hit.misses)
            append(len(hit.fits))
        per_node[shape.key] = values
    return per_node, fits, misses


def _candidates(
    tree: NetworkTree, tier: int, pin: _Pin, totals: dict[bytes, tuple[int, ...]], need: dict[bytes, int]
) -> list[str]:
    """The tier's hypernodes whose slots cover every shape, holding the running members and inside their
    allowed domain; tightest first (Volcano's binpack), then by name."""
    ids: Sequence[int] = tree.hypernode_ids_at(tier)
    for key, n in need.items():
        column = totals[key]
        ids = [i for i in ids if column[i] >= n]
    out: list[tuple[int, str]] = []
    for i in ids:
        name = tree.hypernodes[i]
        if pin.lca is not None and not (name == pin.lca or _is_within(tree, pin.lca, name)):
            continue
        if pin.domain is not None and not (name == pin.domain or _is_within(tree, name, pin.domain)):
            continue
        out.append((sum(totals[key][i] for key in need), name))
    out.sort()
    return [name for _, name in out]


def _is_within(tree: NetworkTree, inner: str, outer: str) -> bool:
    """Whether hypernode `inner` lies inside `outer` (its node range inside)."""
    a, b = tree.node_range(inner)
    c, d = tree.node_range(outer)
    return c <= a and b <= d and b > a


def _most_slots(tree: NetworkTree, tier: int, totals: dict[bytes, tuple[int, ...]], need: dict[bytes, int]) -> int:
    best = 0
    for name in tree.hypernodes_at(tier):
        i = tree.hypernode_index(name)
        best = max(best, min(min(totals[key][i], n) for key, n in need.items()) if need else 0)
    return best


# --- a plan inside one candidate ---------------------------------------------------------------


def _fill_order(tree: NetworkTree, hypernode: str, free: dict[str, int], anchor: str | None) -> list[str]:
    """The candidate's nodes in the order members fill them: the anchor's domain first, then child
    domains with the most free slots first (fewest domains used), nodes by most slots, then name."""
    start, end = tree.node_range(hypernode)
    prefix = [0]
    for name in tree.nodes[start:end]:
        prefix.append(prefix[-1] + free.get(name, 0))

    def slots_under(h: str) -> int:
        a, b = tree.node_range(h)
        return prefix[b - start] - prefix[a - start]

    def walk(h: str) -> list[str]:
        nodes = sorted((n for n in tree.direct_nodes(h) if free.get(n, 0) > 0), key=lambda n: (-free[n], n))
        children = [(c, slots_under(c)) for c in tree.children(h)]
        first = anchor if anchor is not None else ""
        children.sort(key=lambda cs: (not _holds(tree, cs[0], first), -cs[1], cs[0]))
        for child, slots in children:
            if slots > 0:
                nodes.extend(walk(child))
        return nodes

    return walk(hypernode)


def _holds(tree: NetworkTree, hypernode: str, anchor: str) -> bool:
    return bool(anchor) and (hypernode == anchor or _is_within(tree, anchor, hypernode))


def _plan(
    tree: NetworkTree,
    hypernode: str,
    shapes: list[_Shape],
    per_node: dict[bytes, list[int]],
    fits: dict[tuple[bytes, str], tuple[NodeFit, ...]],
    sub_groups: tuple[SubGroupPolicy, ...],
    anchor: str | None,
) -> _Plan | None:
    """Members on nodes of `hypernode`, or None when they do not all fit.

    A node serves one shape only (each shape's slots assume the node as it is now)."""
    taken: set[str] = set()  # nodes given to an earlier shape
    assignments: list[tuple[str, str, int]] = []
    score = 0.0
    left = 0
    start, end = tree.node_range(hypernode)
    for shape in shapes:
        values = per_node[shape.key]
        free = {tree.nodes[i]: values[i] for i in range(start, end) if values[i] and tree.nodes[i] not in taken}
        used: dict[str, int] = {}
        for group in _subgroups(shape.members, sub_groups):
            domain = _group_domain(tree, hypernode, group, free, sub_groups) if sub_groups else hypernode
            if domain is None:
                return None
            remaining = list(reversed(group))  # popped from the end: name order
            for node in _fill_order(tree, domain, free, anchor):
                while remaining and free[node] > 0:
                    nth = used.get(node, 0)
                    used[node] = nth + 1
                    free[node] -= 1
                    assignments.append((remaining.pop().uid, node, nth))
                    score += fits[(shape.key, node)][nth].score.score
                if not remaining:
                    break
            if remaining:
                return None
        taken.update(used)
        left += sum(free.values())
    return _Plan(hypernode=hypernode, assignments=tuple(assignments), score=round(score, 6), free_after=left)


def _subgroups(members: list[PodRequest], policies: tuple[SubGroupPolicy, ...]) -> list[list[PodRequest]]:
    """Members split by the first policy: by its label values, then in chunks of its size (name order)."""
    if not policies:
        return [members]
    policy = policies[0]
    by_labels: dict[tuple[str, ...], list[PodRequest]] = {}
    for member in members:
        by_labels.setdefault(tuple(member.labels.get(k, "") for k in policy.match_label_keys), []).append(member)
    groups: list[list[PodRequest]] = []
    for _, group in sorted(by_labels.items()):
        size = policy.sub_group_size or len(group)
        groups.extend(group[i : i + size] for i in range(0, len(group), size))
    return groups


def _group_domain(
    tree: NetworkTree,
    hypernode: str,
    group: list[PodRequest],
    free: dict[str, int],
    policies: tuple[SubGroupPolicy, ...],
) -> str | None:
    """The smallest domain inside `hypernode`, within the subgroup's tier limit, with room for the group."""
    network = policies[0].network
    hard, limit = _limit(tree, network, "subGroupPolicy.networkTopology")
    best: tuple[int, int, str] | None = None
    start, end = tree.node_range(hypernode)
    for name in tree.hypernodes:
        tier = tree.tier_of(name)
        if tier > limit and hard:
            continue
        a, b = tree.node_range(name)
        if not (start <= a and b <= end and b > a):
            continue
        room = sum(free.get(n, 0) for n in tree.nodes[a:b])
        if room >= len(group):
            key = (tier, room, name)
            if best is None or key < best:
                best = key
    if best is None and not hard:
        return hypernode
    return None if best is None else best[2]


# --- the answer ------------------------------------------------------------------------------


def _placed(
    gang: GangRequest,
    tree: NetworkTree,
    index: ClusterIndex,
    shapes: list[_Shape],
    plan: _Plan,
    fits: dict[tuple[bytes, str], tuple[NodeFit, ...]],
    running: list[PodRequest],
    planned: int,
) -> GangDecision:
    shape_of = {m.uid: s for s in shapes for m in s.members}
    members = {m.uid: m for s in shapes for m in s.members}
    placements: dict[str, MemberPlacement] = {}
    for uid, node_name, nth in plan.assignments:
        shape = shape_of[uid]
        fit = fits[(shape.key, node_name)][nth]
        node = index.node(node_name)
        uuids = {d.index: d.uuid for d in node.devices}
        device_request = shape.claim.request
        parts = dict(fit.choice.parts)
        parts.update(fit.score.parts)
        placements[uid] = MemberPlacement(
            name=members[uid].name,
            uid=uid,
            node=node_name,
            devices=tuple(msgspec.structs.replace(a, uuid=uuids.get(a.index, "")) for a in fit.choice.assignments),
            score=fit.score.score,
            score_parts=parts,
            qos=device_request.qos if device_request is not None else "",
            app_class=device_request.app_class if device_request is not None else "",
        )
    pending = sorted(members.values(), key=lambda p: (p.name, p.uid))
    return _decision(gang, tree, index, pending, placements, running, placed=True, reason="", planned=planned)


def _decision(
    gang: GangRequest,
    tree: NetworkTree,
    index: ClusterIndex,
    pending: Sequence[PodRequest],
    placements: dict[str, MemberPlacement],
    running: list[PodRequest],
    *,
    placed: bool,
    reason: str,
    planned: int = 0,
) -> GangDecision:
    pods = [placements.get(p.uid, MemberPlacement(name=p.name, uid=p.uid)) for p in pending]
    pods += [MemberPlacement(name=p.name, uid=p.uid, node=p.node_name, running=True) for p in running]
    nodes = [p.node for p in pods if p.node is not None and tree.is_node(p.node)]
    hypernode = tree.lca(nodes) if placed and nodes else None
    return GangDecision(
        gang=gang.name,
        placed=placed,
        hypernode=hypernode,
        tier=tree.tier_of(hypernode) if hypernode is not None else None,
        pods=tuple(sorted(pods, key=lambda p: (p.name, p.uid))),
        reason=reason,
        hypernodes_planned=planned,
    )


def _why_not(
    index: ClusterIndex,
    gang: GangRequest,
    misses: list[str],
    hard: bool,
    max_tier: int,
    best_slots: int,
    need: dict[bytes, int],
) -> str:
    """The gang's reason: how many members the best domain holds, and kube-scheduler's per-node counts."""
    total = sum(need.values())
    where = f"no hypernode of tier <= {max_tier}" if hard else "no part of the network tree"
    head = f"gang {gang.name}: {where} holds its {total} pending member(s) (at most {best_slots} fit in one)"
    return f"{head}; {fit_error_message(len(index), misses)}" if misses else head


def clear() -> None:
    _slots.clear()
    _node_slots_memo.clear()
