"""Slots: how many members of each shape every node takes.

Members of one shape (same requests and constraints) share one request: per node, how many
fit one after the other (the device class answered again with each member's devices held,
memoised per class), capped by the node's free resources and pod count and its node rules.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import msgspec

from engine.cluster.index import ClusterIndex, DeviceClasses
from engine.cluster.network import NetworkTree
from engine.core.memo import BoundedCache, Memo
from engine.core.model import Allocation, Mode, NodeState, PodRequest, WorkloadClass
from engine.decide.claim import NO_DEVICES, Claim, claim
from engine.decide.gang.joint import JointRules
from engine.decide.gang.ranks import RANK_ANNOTATIONS
from engine.decide.kube.resources import pods_on_node
from engine.decide.node_rules import NodeFactsTable, PodRules
from engine.node.answer import NodeAnswers, NodeFit
from engine.node.registry import Vendors
from engine.node.vendor import RequestError

SLOT_BOUND = 16_384
NO_ROOM = "node(s) had no room for a member"  # when nothing more precise is known
# Labels that differ per member by construction: left out of a shape, as the rank labels are (a member
# per shape would leave each node to one member).
POD_NAME_LABELS = frozenset(("statefulset.kubernetes.io/pod-name",))


class Shape:
    """Members that ask for the same thing: one request read once, its fits per device class remembered."""

    def __init__(
        self, tables: SlotTables, key: bytes, request: PodRequest, pod_claim: Claim, rules: PodRules, mode: Mode
    ) -> None:
        self.tables = tables
        self.key = key
        self.request = request
        self.claim = pod_claim
        self.rules = rules
        self.mode = mode
        self.members: list[PodRequest] = []
        plugin, device_request = pod_claim.plugin, pod_claim.request
        request_id_of = tables.node.request_id_of
        self.request_id = request_id_of(plugin, device_request, mode) if plugin and device_request else None
        self.resources = {r: v for r, v in rules.facts.requests.items() if v > 0}

    def class_fits(self, index: ClusterIndex, class_id: int, node: NodeState, cap: int) -> Fits:
        """The successive answers for up to `cap` members on one node of this class (each after the last),
        and why the first member does not fit when none does."""
        plugin, device_request = self.claim.plugin, self.claim.request
        if plugin is None or device_request is None:
            return Fits(fits=(NO_DEVICES,) * cap)
        key = None
        table = self.tables.fits_table(index)
        if self.request_id is not None and not device_request.reads_uuids:
            key = (self.request_id, class_id, cap)
            found = table.get(key)
            if found is not None:
                return found
        state = index.device_classes.state_of(node, index.reads) if key is not None else node
        fits: list[NodeFit] = []
        miss = ""
        evaluate = self.tables.node.evaluate
        while len(fits) < cap:
            answer = evaluate(plugin, device_request, state, self.mode)
            if not isinstance(answer, NodeFit):
                miss = answer.unfit.summary
                break
            fits.append(answer)
            state = msgspec.structs.replace(state, allocations=state.allocations + _held(answer, device_request))
        out = Fits(fits=tuple(fits), miss=miss if not fits else "")
        if key is not None:
            table.put(key, out)
        return out

    def resource_slots(self, node: NodeState, cap: int) -> int:
        """Members the node's free resources, pod count and host ports still take (resources: all of them
        when not reported)."""
        if self.rules.facts.host_ports:
            cap = min(cap, 1)  # a second member of the shape wants the ports the first one took
        if node.allocatable is None:
            return cap
        facts = self.rules.nodes.of(node)
        allocatable = facts.allocatable or {}
        free = allocatable.get("pods", 0) - pods_on_node(facts.requested, facts.pod_count) * 1000
        slots = min(cap, max(0, free // 1000))
        for resource, amount in self.resources.items():
            if resource in ("pods",):
                continue
            room = allocatable.get(resource, 0) - facts.requested.get(resource, 0)
            slots = min(slots, max(0, room // amount))
        return slots

    def resource_misses(self, node: NodeState) -> tuple[str, ...]:
        """kube-scheduler's NodeResourcesFit reasons for a node whose free resources take no member."""
        if node.allocatable is None:
            return ()
        facts = self.rules.nodes.of(node)
        allocatable = facts.allocatable or {}
        misses = []
        if allocatable.get("pods", 0) - pods_on_node(facts.requested, facts.pod_count) * 1000 < 1000:
            misses.append("Too many pods")
        for resource, amount in sorted(self.resources.items()):
            if resource != "pods" and allocatable.get(resource, 0) - facts.requested.get(resource, 0) < amount:
                misses.append(f"Insufficient {resource}")
        return tuple(misses)


class Fits(msgspec.Struct, frozen=True, kw_only=True):
    fits: tuple[NodeFit, ...]
    miss: str = ""  # kube-style summary when no member fits


def _held(fit: NodeFit, device_request: object) -> tuple[Allocation, ...]:
    qos = getattr(device_request, "qos", "")
    app_class = getattr(device_request, "app_class", "")
    return tuple(
        Allocation(pod_uid="", index=a.index, memory_mib=a.memory_mib, cores=a.cores, qos=qos, app_class=app_class)
        for a in fit.choice.assignments
    )


def _shape_key(request: PodRequest, index: ClusterIndex | None) -> bytes:
    # A pod index written as an annotation or label (an Indexed Job's) differs per member and no node rule
    # reads it.
    annotations = {k: v for k, v in request.annotations.items() if k not in RANK_ANNOTATIONS}
    return msgspec.json.encode(
        (
            request.requests,
            annotations,
            request.node_selector,
            request.affinity,
            request.tolerations,
            request.host_ports,
            _pod_topology_key(request, index),
        )
    )


def _pod_topology_key(request: PodRequest, index: ClusterIndex | None) -> object:
    """What InterPodAffinity and PodTopologySpread read of a member, where either has anything to read."""
    asks = (request.affinities is not None and not request.affinities.empty) or bool(
        request.topology_spread_constraints
    )
    if not asks and (index is None or not index.pods.has_pods_with_affinity):
        return None
    labels = {k: v for k, v in request.labels.items() if k not in RANK_ANNOTATIONS and k not in POD_NAME_LABELS}
    return (request.namespace, labels, request.affinities, request.topology_spread_constraints)


def shapes_of(
    tables: SlotTables,
    vendors: Vendors,
    facts: NodeFactsTable,
    pending: list[PodRequest],
    mode: Mode,
    workload: tuple[WorkloadClass, ...],
    index: ClusterIndex | None = None,
    claims: Callable[[str], bytes] | None = None,
) -> list[Shape]:
    """The pending members grouped by shape, the largest group first (then by first name); `index`: the
    cluster whose running pods the members' InterPodAffinity and PodTopologySpread filters read;
    `claims`: what a member's ResourceClaims ask, by uid (members asking differently differ in shape)."""
    by_key: dict[bytes, Shape] = {}
    for pod in pending:
        key = _shape_key(pod, index) + (claims(pod.uid) if claims is not None else b"")
        shape = by_key.get(key)
        if shape is None:
            try:
                pod_claim = claim(vendors, pod, mode, workload)
                rules = PodRules(pod, vendors.share_resources, facts, index)
            except RequestError as exc:
                raise RequestError(f"pods[{pod.name}].{exc.field}", exc.reason) from None
            shape = by_key[key] = Shape(tables, key, pod, pod_claim, rules, mode)
        shape.members.append(pod)
    return sorted(by_key.values(), key=lambda s: (-len(s.members), s.members[0].name))


class NodeSlots(msgspec.Struct, frozen=True):
    node: NodeState  # held, so the identity the memo is keyed by stays this node's
    fits: tuple[NodeFit, ...]
    misses: tuple[str, ...]  # kube-style reasons when it takes none


# Per shape and node state (by identity): what the node takes. A gang decision asks every node of
# the tree; between two decisions only the nodes that changed are worked out again.
NODE_SLOTS_BOUND = 65_536


class SlotTables:
    """One engine's gang slots: a class's successive fits per (request, class, cap), kept per set of class
    ids (an index's own), and what each node state takes of a shape."""

    def __init__(self, memo: Memo, node: NodeAnswers) -> None:
        self.memo = memo
        self.node = node
        self._fits: weakref.WeakKeyDictionary[DeviceClasses, BoundedCache[tuple[int, int, int], Fits]] = (
            weakref.WeakKeyDictionary()
        )
        self.node_slots: BoundedCache[tuple[bytes, int], NodeSlots] = memo.table(NODE_SLOTS_BOUND, recency=False)

    def fits_table(self, index: ClusterIndex) -> BoundedCache[tuple[int, int, int], Fits]:
        table = self._fits.get(index.device_classes)
        if table is None:
            table = self._fits[index.device_classes] = self.memo.table(SLOT_BOUND)
        return table

    def clear(self) -> None:
        self._fits.clear()


def _slots_of(index: ClusterIndex, shape: Shape, node: NodeState, cap: int) -> NodeSlots:
    """What the node takes of the shape (at most `cap` members), worked out afresh."""
    failure = shape.rules.failure(node)
    if failure is not None:
        return NodeSlots(node, (), tuple(failure))
    room = shape.resource_slots(node, cap)
    if not room:  # every node that takes no member says why, so that kube's count covers every node
        return NodeSlots(node, (), shape.resource_misses(node) or (NO_ROOM,))
    answered = shape.class_fits(index, index.class_id(node.name), node, room)
    if answered.fits:
        return NodeSlots(node, answered.fits, ())
    return NodeSlots(node, (), (answered.miss or NO_ROOM,))


def node_slots(
    tables: SlotTables, index: ClusterIndex, tree: NetworkTree, shapes: list[Shape], joint: JointRules | None = None
) -> tuple[dict[bytes, list[int]], dict[tuple[bytes, str], tuple[NodeFit, ...]], list[str]]:
    """Per shape, the members each tree node takes (in tree order), the fits behind them, and for the
    first shape the reasons of every cluster node that takes none (kube-scheduler's summaries); `joint` cuts a node's
    slots to the members' per-node caps (one per node for hostname anti-affinity)."""
    per_node: dict[bytes, list[int]] = {}
    fits: dict[tuple[bytes, str], tuple[NodeFit, ...]] = {}
    misses: list[str] = []
    get = index.get
    nodes = [get(name) for name in tree.nodes]
    memo = tables.node_slots
    for number, shape in enumerate(shapes):
        cap = len(shape.members)
        # Rules that read the pods around a node depend on other nodes too: not kept per node state.
        remembered = tables.memo.enabled and shape.rules.topology is None
        prefix = shape.key + cap.to_bytes(4, "little")
        keys = [(prefix, id(node)) for node in nodes]
        found = memo.get_many(keys) if remembered else [None] * len(keys)
        values: list[int] = []
        append = values.append
        for name, node, key, hit in zip(tree.nodes, nodes, keys, found, strict=True):
            if node is None:  # a name the tree holds but the cluster does not: no node to count
                append(0)
                continue
            if hit is None or hit.node is not node:
                hit = _slots_of(index, shape, node, cap)
                if remembered:
                    memo.put(key, hit)
            most = joint.node_cap(shape.key, name) if joint is not None else None
            if most is not None and len(hit.fits) > most:
                hit = NodeSlots(node, hit.fits[:most], ("node(s) didn't match pod anti-affinity rules",))
            if hit.fits:
                fits[(shape.key, name)] = hit.fits
            elif number == 0:
                misses.extend(hit.misses)
            append(len(hit.fits))
        per_node[shape.key] = values
    return per_node, fits, misses


def slots_on(index: ClusterIndex, shape: Shape, node: NodeState) -> int:
    """How many members of the shape the node (as `index` holds it) takes, worked out afresh."""
    return len(_slots_of(index, shape, node, len(shape.members)).fits)
