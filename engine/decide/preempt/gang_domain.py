"""One hypernode domain of a gang preemption: the victims there, whole victim gangs or none of them.

Inside the domain (its nodes and hypernodes as a tree of their own):

    potential victims   the pods there of strictly lower priority than the preemptor, never the
                        preemptor gang's own; a victim gang whose every running member is of
                        lower priority may go whole (its members outside the domain with it)
    all of them gone    the gang must fit inside the domain, else the domain is no candidate
    reprieve            victim gangs first, most important first: the whole gang put back when the
                        preemptor still fits; else its members put back one by one (most important
                        first) while it fits, which leaves its least important members, its spare
                        ones, as victims, if they are no more than its running count above
                        minMember; else the whole gang goes (never below minMember). Then the lone
                        pods as kube's reprieve does: budget-violating ones first, each most
                        important first, put back while the preemptor fits
    the preemptor fits  a gang of one shape without subgroups: the members the domain's nodes take
                        (their slots) are enough; otherwise the gang placed in the domain
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree
from engine.cluster.network.index import Draft
from engine.core.model import Mode, NodeState, WorkloadClass
from engine.decide.gang import GangDecision, GangRequest, place_gang
from engine.decide.gang.slots import Shape, node_slots, slots_on
from engine.decide.parts import DecisionParts
from engine.decide.preempt.budgets import split_by_violation
from engine.decide.preempt.model import DisruptionBudget, RunningPod
from engine.decide.preempt.room import without
from engine.decide.preempt.victims import importance_order, start_of


def subtree(tree: NetworkTree, hypernode: str) -> NetworkTree:
    """The hypernode and what lies under it, as a tree of its own (its parent: the virtual top).

    The virtual top is the whole tree: copied, it would be its own parent, a cycle."""
    if hypernode == tree.virtual_top:
        return tree
    draft = Draft()
    stack = [hypernode]
    while stack:
        name = stack.pop()
        draft.tier[name] = tree.tier_of(name)
        draft.tier_name[name] = tree.tier_name_of(name)
        for child in tree.children(name):
            draft.hypernode_parent[child] = name
            stack.append(child)
        for node in tree.direct_nodes(name):
            draft.node_parent[node] = name
            draft.nodes.append(node)
    return NetworkTree(draft, tree.tier_names)


class GangContext(msgspec.Struct, frozen=True, kw_only=True):
    """What every domain of one gang preemption reads."""

    parts: DecisionParts
    index: ClusterIndex  # the cluster's nodes as they are
    new_index: Callable[[], ClusterIndex]  # an empty index with the engine's class ids
    gang: GangRequest  # all or nothing (minimum placement off)
    shapes: list[Shape]  # the pending members by shape
    priority: int
    by_node: dict[str, list[RunningPod]]  # the running pods by node, in the order given
    gangs: dict[str, list[RunningPod]]  # the running members of every victim gang, most important first
    budgets: Sequence[DisruptionBudget]
    mode: Mode
    workload: tuple[WorkloadClass, ...]
    ordered: dict[str, list[RunningPod]] = {}  # pods_on's answers (shared by the preemptions of one `running`)

    def pods_on(self, node: str) -> list[RunningPod]:
        """The running pods on `node`, most important first (sorted when first asked: a preemption at
        10,000 nodes works out a few domains, and sorting every node's pods took longer than they)."""
        found = self.ordered.get(node)
        if found is None:
            found = self.ordered[node] = importance_order(self.by_node.get(node, ()))
        return found

    @property
    def by_slots(self) -> bool:
        """One shape, no subgroup: the slots the nodes take say whether the gang fits."""
        return len(self.shapes) == 1 and not self.gang.sub_groups


class DomainVictims(msgspec.Struct, frozen=True, kw_only=True):
    hypernode: str
    victims: tuple[RunningPod, ...]  # most important first
    whole_gangs: tuple[str, ...]
    decision: GangDecision


class _Domain:
    """The domain's nodes without the pods evicted so far, kept current one node at a time."""

    def __init__(self, context: GangContext, hypernode: str, tree: NetworkTree) -> None:
        self.context, self.hypernode, self.tree = context, hypernode, tree
        self.index = context.new_index()
        self.states: dict[str, NodeState] = {}
        for name in tree.nodes:
            node = context.index.get(name)
            if node is not None:
                self.states[name] = node
                self.index.upsert(node)
        self.evicted: dict[str, RunningPod] = {}
        self.slots: dict[str, int] = {}  # by_slots: the members each node takes now
        if context.by_slots:
            per_node, _, _ = node_slots(context.parts.slots, self.index, self.tree, context.shapes)
            self.slots = dict(zip(self.tree.nodes, per_node[context.shapes[0].key], strict=True))
        self.total = sum(self.slots.values())

    def set(self, pods: Sequence[RunningPod], gone: bool) -> None:
        touched = set()
        for pod in pods:
            if gone:
                self.evicted[pod.key] = pod
            else:
                self.evicted.pop(pod.key, None)
            touched.add(pod.node)
        for name in touched & self.states.keys():
            left = [p for p in self.context.pods_on(name) if p.key in self.evicted]
            self._show(name, without(self.states[name], left) if left else self.states[name])

    def _show(self, name: str, state: NodeState, slots: int | None = None) -> None:
        """The node as `state` (its slots when known)."""
        self.index.upsert(state)
        if self.context.by_slots:
            now = slots_on(self.index, self.context.shapes[0], state) if slots is None else slots
            self.total += now - self.slots[name]
            self.slots[name] = now

    def fits(self) -> bool:
        if self.context.by_slots:
            return self.total >= len(self.context.shapes[0].members)
        return self.place().placed

    def place(self) -> GangDecision:
        context = self.context
        return place_gang(context.parts, self.index, self.tree, context.gang, context.mode, workload=context.workload)

    def put_back_if_fits(self, pods: Sequence[RunningPod]) -> bool:
        """Put `pods` back; keep them there when the preemptor still fits, else evict them again."""
        inside = {p.node for p in pods if p.node in self.states}
        before = {n: (self.index.node(n), self.slots.get(n)) for n in inside}
        self.set(pods, gone=False)
        if not inside or self.fits():
            return True
        for pod in pods:
            self.evicted[pod.key] = pod
        for name, (state, slots) in before.items():  # as it was: nothing to work out again
            self._show(name, state, slots)
        return False


def domain_victims(context: GangContext, hypernode: str, tree: NetworkTree) -> DomainVictims | None:
    """The victims in the domain (module docstring), or None when the gang cannot fit there."""
    domain = _Domain(context, hypernode, subtree(tree, hypernode))
    below = context.priority
    lone: list[RunningPod] = []
    victim_gangs: dict[str, list[RunningPod]] = {}
    for name in domain.states:
        for pod in context.pods_on(name):
            if pod.priority >= below or pod.gang == context.gang.name:
                continue
            if pod.gang and pod.gang in context.gangs:
                victim_gangs.setdefault(pod.gang, [])
            else:
                lone.append(pod)
    start: list[RunningPod] = list(lone)
    for gang in victim_gangs:
        members = context.gangs[gang]
        if all(m.priority < below for m in members):
            victim_gangs[gang] = list(members)  # whole
        else:  # some member may not be evicted: only its spare members, the least important first
            spare = max(len(members) - members[0].gang_min_member, 0)
            inside = [m for m in members if m.node in domain.states and m.priority < below]
            victim_gangs[gang] = inside[len(inside) - min(spare, len(inside)) :]
        start.extend(victim_gangs[gang])
    domain.set(start, gone=True)
    if not domain.fits():
        return None
    whole = _reprieve_gangs(context, domain, victim_gangs)
    violating, fine = split_by_violation(importance_order(lone), context.budgets)
    order = [*violating, *fine]
    if context.by_slots:  # whole nodes first: the nodes whose most important pod comes first are kept
        _reprieve_nodes(domain, order)
    for pod in order:
        if pod.key in domain.evicted:
            domain.put_back_if_fits([pod])
    decision = domain.place()
    if not decision.placed:
        return None
    return DomainVictims(
        hypernode=hypernode,
        victims=tuple(importance_order(list(domain.evicted.values()))),
        whole_gangs=tuple(sorted(whole)),
        decision=decision,
    )


def _reprieve_nodes(domain: _Domain, order: Sequence[RunningPod]) -> None:
    """Each node's lone pods put back together while the gang still fits without that node, the nodes in
    the order of their first pod in `order` (a node left as it is costs one lookup)."""
    seen: set[str] = set()
    for pod in order:
        if pod.node in seen:
            continue
        seen.add(pod.node)
        mine = [p for p in order if p.node == pod.node and p.key in domain.evicted]
        if domain.total - domain.slots.get(pod.node, 0) >= len(domain.context.shapes[0].members):
            domain.set(mine, gone=False)


def _reprieve_gangs(context: GangContext, domain: _Domain, victim_gangs: dict[str, list[RunningPod]]) -> list[str]:
    """Victim gangs put back (module docstring); the gangs left evicted whole."""
    whole: list[str] = []

    def importance(gang: str) -> tuple[int, float, str]:
        members = context.gangs[gang]
        return (-max(m.priority for m in members), min(start_of(m) for m in members), gang)

    for gang in sorted(victim_gangs, key=importance):
        evicted = victim_gangs[gang]
        if not evicted or domain.put_back_if_fits(evicted):
            continue
        members = context.gangs[gang]
        spare = max(len(members) - members[0].gang_min_member, 0)
        kept = [p for p in evicted if domain.put_back_if_fits([p])]
        if len(evicted) - len(kept) <= spare:
            continue
        domain.set(kept, gone=True)  # below its minimum: the whole gang goes
        whole.append(gang)
    return whole
