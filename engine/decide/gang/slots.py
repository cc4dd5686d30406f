"""Slots: how many members of each shape every node takes.

Members of one shape (same requests and constraints) share one request: per node, how many
fit one after the other (the device class answered again with each member's devices held,
memoised per class), capped by the node's free resources and pod count and its node rules.
"""

from __future__ import annotations

import msgspec

from engine.cluster.index import ClusterIndex, class_state
from engine.cluster.network import NetworkTree
from engine.core import cache
from engine.core.cache import BoundedCache
from engine.core.model import Allocation, Mode, NodeState, PodRequest, WorkloadClass
from engine.decide.claim import NO_DEVICES, Claim, claim
from engine.decide.node_rules import PodRules, node_facts
from engine.node import answer as node_answer
from engine.node.answer import NodeFit, request_id_of
from engine.node.vendor import RequestError, VendorRegistry

SLOT_BOUND = 16_384


class Shape:
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

    def class_fits(self, index: ClusterIndex, class_id: int, node: NodeState, cap: int) -> Fits:
        """The successive answers for up to `cap` members on one node of this class (each after the last),
        and why the first member does not fit when none does."""
        plugin, device_request = self.claim.plugin, self.claim.request
        if plugin is None or device_request is None:
            return Fits(fits=(NO_DEVICES,) * cap)
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
        out = Fits(fits=tuple(fits), miss=miss if not fits else "")
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


class Fits(msgspec.Struct, frozen=True, kw_only=True):
    fits: tuple[NodeFit, ...]
    miss: str = ""  # kube-style summary when no member fits


_slots: BoundedCache[tuple[int, int, int], Fits] = BoundedCache(SLOT_BOUND)


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


def shapes_of(
    registry: VendorRegistry, pending: list[PodRequest], mode: Mode, workload: tuple[WorkloadClass, ...]
) -> list[Shape]:
    by_key: dict[bytes, Shape] = {}
    for pod in pending:
        key = _shape_key(pod)
        shape = by_key.get(key)
        if shape is None:
            try:
                pod_claim = claim(registry, pod, mode, workload)
                rules = PodRules(pod, registry.share_resources)
            except RequestError as exc:
                raise RequestError(f"pods[{pod.name}].{exc.field}", exc.reason) from None
            shape = by_key[key] = Shape(key, pod, pod_claim, rules, mode)
        shape.members.append(pod)
    return sorted(by_key.values(), key=lambda s: (-len(s.members), s.members[0].name))


class NodeSlots(msgspec.Struct, frozen=True):
    node: NodeState  # held, so the identity the memo is keyed by stays this node's
    fits: tuple[NodeFit, ...]
    misses: tuple[str, ...]  # kube-style reasons when it takes none


# Per shape and node state (by identity): what the node takes. A gang decision asks every node of
# the tree; between two decisions only the nodes that changed are worked out again.
NODE_SLOTS_BOUND = 65_536


_node_slots_memo: BoundedCache[tuple[bytes, int], NodeSlots] = BoundedCache(NODE_SLOTS_BOUND, recency=False)


def _slots_of(index: ClusterIndex, shape: Shape, node: NodeState, cap: int) -> NodeSlots:
    """What the node takes of the shape (at most `cap` members), worked out afresh."""
    failure = shape.rules.failure(node)
    if failure is not None:
        return NodeSlots(node, (), tuple(failure))
    room = shape.resource_slots(node, cap)
    answered = shape.class_fits(index, index.class_id(node.name), node, room) if room else Fits(fits=())
    return NodeSlots(node, answered.fits, (answered.miss,) if answered.miss and not answered.fits else ())


def node_slots(
    index: ClusterIndex, tree: NetworkTree, shapes: list[Shape]
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
