"""Gang preemption: a gang that fits nowhere makes room inside one network domain (Volcano, KEP-5710).

Volcano's gang preemption and reclaim (v1.15) and Kubernetes' workload-aware preemption
(KEP-5710) make room for a whole pod group, one HyperNode domain at a time, never above a hard
tier. Here:

    the tiers          from the lowest up, never above a hard constraint's tier; only the
                       hypernodes that hold the gang's running members (and lie inside their
                       allowed domain, as placing the gang requires)
    a domain's estimate  for a gang of one shape asking whole devices (default mode): per node,
                       the members it could take with every lower-priority pod gone and the least
                       priority sum (offset by 2^31 each, a budget-protected pod weighing more than
                       any sum) of the pods that must go for one member; the domain's estimate sums
                       its cheapest nodes until they hold the gang. A domain whose devices, or
                       whose nodes with every lower-priority pod gone, cannot hold it is none
    the domain chosen  the lowest tier that has a candidate; its domains in order of their estimate,
                       until DOMAINS_COMPARED of them have victims; of those the fewest budget
                       violations, the lowest highest victim priority, the smallest sum, the
                       fewest victims, the best device score of the members placed there (link
                       quality and the fewest broken sets), then the name. Volcano takes the first
                       domain of its gradient walk that works; every domain of a tier compared in
                       full costs ~60 ms each at 128 nodes, too much at 10,000 nodes
    the search's bound  each set of nodes is worked out at most once: a domain holding the same
                       nodes as one that had no room (a hypernode over one child and no nodes of
                       its own, the virtual top over one spine) is skipped, so a preemption works out
                       at most as many domains as the tree has distinct node sets, each by one greedy
                       reprieve pass (no subsets enumerated)
    victims            gang_domain.py: whole victim gangs or only their spare members, never a
                       gang left below minMember; preemption only when the gang is then placed
                       whole in the domain
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import msgspec

from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree, aggregate
from engine.core.model import Mode, NodeState, WorkloadClass
from engine.decide.gang import GangDecision, GangRequest
from engine.decide.gang.ranks import member_key
from engine.decide.gang.slots import shapes_of
from engine.decide.gang.tiers import is_within, limit_of, pin_of
from engine.decide.parts import DecisionParts
from engine.decide.preempt.bounds import PRIORITY_OFFSET
from engine.decide.preempt.budgets import selects, split_by_violation
from engine.decide.preempt.gang_domain import DomainVictims, GangContext, domain_victims
from engine.decide.preempt.model import PREEMPT_NEVER, DisruptionBudget, RunningPod, Victim
from engine.decide.preempt.victims import importance_order

VIOLATION_WEIGHT = 2.0**62  # in a node's estimate, a pod a budget protects weighs more than any priority sum
COSTS_KEPT = 4  # per running sequence: the per-node estimates of the last few gangs
NodeCostsKept = dict[str, tuple[NodeState | None, tuple[int, float]]]
DOMAINS_COMPARED = 2  # domains of one tier whose victims are worked out and compared, by estimate
NEVER_REASON = "preemption: not eligible due to preemptionPolicy=Never."


class GangPreemption(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a gang's preemption: the domain, the victims there, the gang placed as if they were
    gone; `hypernode` None: none (`reason` says why)."""

    gang: str
    hypernode: str | None = None
    tier: int | None = None
    victims: tuple[Victim, ...] = ()
    whole_gangs: tuple[str, ...] = ()  # victim gangs evicted whole (never one left below its minMember)
    budget_violations: int = 0
    decision: GangDecision | None = None
    reason: str = ""
    hypernodes_tried: int = 0


class RunningGroups:
    """The running pods by node (as given; sorted by importance per node when a domain first asks) and
    by pod group (most important first). An engine keeps them while `running` is the same object:
    grouping 30,000 pods anew took a tenth of a preemption at 10,000 nodes."""

    def __init__(self, running: Sequence[RunningPod]) -> None:
        self.running = running
        self.by_node: dict[str, list[RunningPod]] = {}
        gangs: dict[str, list[RunningPod]] = {}
        for pod in running:
            self.by_node.setdefault(pod.node, []).append(pod)
            if pod.gang:
                gangs.setdefault(pod.gang, []).append(pod)
        self.gangs = {g: importance_order(pods) for g, pods in gangs.items()}
        self.ordered: dict[str, list[RunningPod]] = {}  # GangContext.pods_on's answers
        self._costs: dict[tuple[int, str, int], NodeCostsKept] = {}

    def node_costs(self, key: tuple[int, str, int]) -> NodeCostsKept:
        """The per-node estimates of one (priority, gang, devices per member), kept for the next
        preemption of the same gang (a pending gang is retried while the cluster stays as it is);
        the last COSTS_KEPT keys only."""
        found = self._costs.get(key)
        if found is None:
            if len(self._costs) >= COSTS_KEPT:
                del self._costs[next(iter(self._costs))]
            found = self._costs[key] = {}
        return found

    def matches(self, running: Sequence[RunningPod]) -> bool:
        """Whether these were built from this very sequence (the cache's key)."""
        return self.running is running


def _cost(found: DomainVictims, budgets: Sequence[DisruptionBudget]) -> tuple[float, ...]:
    victims = found.victims
    violations = len(split_by_violation(list(victims), budgets)[0])
    score = sum(m.score for m in found.decision.pods if not m.running)
    return (
        float(violations),
        float(victims[0].priority) if victims else -math.inf,
        float(sum(p.priority + PRIORITY_OFFSET for p in victims)),
        float(len(victims)),
        -score,
    )


class _NodeCosts:
    """Per node, for a gang of whole devices in the default mode: how many members it could take with
    every lower-priority pod gone, and the least priority sum (offset) of the pods that must go for one."""

    def __init__(self, context: GangContext, groups: RunningGroups) -> None:
        self.context = context
        self.count = sum(s.claim.request.count for s in context.shapes if s.claim.request is not None) // max(
            1, len(context.shapes)
        )
        self.by_devices = context.mode == Mode.DEFAULT and self.count > 0 and len(context.shapes) == 1
        self._exhausted = [b for b in context.budgets if b.disruptions_allowed <= 0]
        # by node: the node's state when its cost was worked out, and the cost (budgets: this call only)
        self._kept = {} if context.budgets else groups.node_costs((context.priority, context.gang.name, self.count))

    def of(self, name: str) -> tuple[int, float]:
        node = self.context.index.get(name)
        kept = self._kept.get(name)
        if kept is not None and kept[0] is node:
            return kept[1]
        found = self._work_out(node, name)
        self._kept[name] = (node, found)
        return found

    def _protected(self, pods: Sequence[RunningPod]) -> int:
        """How many of the pods a budget that allows no more disruptions selects (a violation each)."""
        return sum(
            1 for p in pods for b in self._exhausted if b.namespace == p.namespace and selects(b.selector, p.labels)
        )

    def _work_out(self, node: NodeState | None, name: str) -> tuple[int, float]:
        """Run for every node under the tier's domains (10,000 at a time): kept to plain loops."""
        if node is None:
            return 0, math.inf
        held: dict[str, set[int]] = {}
        for a in node.allocations:
            held.setdefault(a.pod_uid, set()).add(a.index)
        free = len(node.devices) - len({a.index for a in node.allocations})
        below, own = self.context.priority, self.context.gang.name
        pods = [p for p in self.context.by_node.get(name, ()) if p.priority < below and p.gang != own]
        # (-devices held, priority): the pods that free the most devices first, the least important first
        lower = sorted((-len(held.get(p.holder, ())) if p.holder else 0, p.priority) for p in pods)
        takes = (free - sum(h for h, _ in lower)) // self.count
        if free >= self.count or takes == 0:
            return takes, 0.0 if free >= self.count else math.inf
        total, cost = free, 0.0
        for devices, prio in lower:
            total -= devices
            cost += prio + PRIORITY_OFFSET
            if total >= self.count:
                break
        return takes, cost + (self._protected(pods) * VIOLATION_WEIGHT if self._exhausted else 0.0)


def _estimate(costs: _NodeCosts, names: Sequence[str], members: int) -> float | None:
    """The least sum of node costs for room for `members` in the domain (None: it never holds them)."""
    if not costs.by_devices:
        return 0.0
    found = sorted((costs.of(n) for n in names), key=lambda tc: tc[1])
    room, total = 0, 0.0
    for takes, cost in found:
        if takes == 0:
            continue
        room += takes
        total += cost
        if room >= members:
            return total
    return None


def preempt_gang(
    parts: DecisionParts,
    index: ClusterIndex,
    new_index: Callable[[], ClusterIndex],
    tree: NetworkTree,
    gang: GangRequest,
    priority: int,
    running: Sequence[RunningPod],
    budgets: Sequence[DisruptionBudget] = (),
    mode: Mode = Mode.DEFAULT,
    *,
    policy: str = "",
    workload: tuple[WorkloadClass, ...] = (),
    groups: RunningGroups | None = None,
) -> GangPreemption:
    """Where `gang` (of `priority`) runs by evicting lower-priority pods inside one domain of `tree`.

    `groups`: `running` by node and by pod group, when the caller kept them from an earlier call."""
    if policy == PREEMPT_NEVER:
        return GangPreemption(gang=gang.name, reason=NEVER_REASON)
    pending = sorted((p for p in gang.pods if not p.node_name), key=member_key)
    if not pending:
        return GangPreemption(gang=gang.name, reason="every member is running")
    hard, max_tier = limit_of(tree, gang.network, "network")
    own_running = [p for p in gang.pods if p.node_name]
    pin = pin_of(tree, own_running, hard, max_tier)
    if groups is None or not groups.matches(running):
        groups = RunningGroups(running)
    context = GangContext(
        parts=parts,
        index=index,
        new_index=new_index,
        gang=msgspec.structs.replace(gang, minimum_placement=False),
        shapes=shapes_of(parts.slots, parts.vendors, parts.facts, pending, mode, workload),
        priority=priority,
        by_node=groups.by_node,
        gangs={g: pods for g, pods in groups.gangs.items() if g != gang.name},
        ordered=groups.ordered,
        budgets=budgets,
        mode=mode,
        workload=workload,
    )
    costs = _NodeCosts(context, groups)
    search = _Search(context, tree, costs, len(pending))
    for tier in tree.tiers:
        if (hard and tier > max_tier) or (pin.lca is not None and tier < tree.tier_of(pin.lca)):
            continue
        found = search.tier(tier, pin.lca, pin.domain)
        if found is not None:
            return _answer(context, tree, found, search.tried)
    where = f"no hypernode of tier <= {max_tier}" if hard else "no hypernode"
    reason = f"preemption: {where} holds gang {gang.name} after evicting its lower-priority pods"
    return GangPreemption(gang=gang.name, reason=reason, hypernodes_tried=search.tried)


class _Search:
    """The domains of one gang preemption, a tier at a time; each set of nodes worked out at most once
    (a hypernode with one child hypernode and no nodes of its own holds what its child holds, as the
    virtual top over one spine does: the victims there are the same, so a set that failed fails again)."""

    def __init__(self, context: GangContext, tree: NetworkTree, costs: _NodeCosts, members: int) -> None:
        self.context, self.tree, self.costs, self.members = context, tree, costs, members
        index = context.index
        self.capacity = aggregate(tree, [len(n.devices) if (n := index.get(x)) is not None else 0 for x in tree.nodes])
        self.failed: set[tuple[int, int]] = set()  # the node spans [start, end) that held no room
        self.tried = 0  # domains whose victims were worked out

    def tier(self, tier: int, lca: str | None, domain: str | None) -> DomainVictims | None:
        """The tier's domain of least cost, among the first DOMAINS_COMPARED by estimate that have room."""
        tree, costs = self.tree, self.costs
        walk: list[tuple[float, str, tuple[int, int]]] = []
        for i in tree.hypernode_ids_at(tier):
            name, span = tree.hypernodes[i], (tree.starts[i], tree.ends[i])
            if span in self.failed or (costs.by_devices and self.capacity[i] < costs.count * self.members):
                continue
            if not _pinned(tree, name, lca, domain):
                continue
            estimate = _estimate(costs, tree.nodes_under(name), self.members)
            if estimate is not None:
                walk.append((estimate, name, span))
        walk.sort()
        found: list[tuple[tuple[float, ...], str, DomainVictims]] = []
        for _, name, span in walk:
            self.tried += 1
            victims = domain_victims(self.context, name, tree)
            if victims is None:
                self.failed.add(span)
                continue
            found.append((_cost(victims, self.context.budgets), name, victims))
            if len(found) == DOMAINS_COMPARED:
                break
        return min(found, key=lambda f: (f[0], f[1]))[2] if found else None


def _pinned(tree: NetworkTree, name: str, lca: str | None, domain: str | None) -> bool:
    if lca is not None and not (name == lca or is_within(tree, lca, name)):
        return False
    return domain is None or name == domain or is_within(tree, name, domain)


def _answer(context: GangContext, tree: NetworkTree, found: DomainVictims, tried: int) -> GangPreemption:
    budgets, priority = context.budgets, context.priority
    violating = {p.key for p in split_by_violation(list(found.victims), budgets)[0]}
    whole = set(found.whole_gangs)
    victims = []
    for pod in found.victims:
        why = [f"priority {pod.priority} < {priority}"]
        if pod.gang:
            why.append(f"its gang {pod.gang} goes whole" if pod.gang in whole else f"a spare member of {pod.gang}")
        if pod.key in violating:
            why.append("its PodDisruptionBudget allows no more disruptions")
        victims.append(Victim(pod=pod.key, priority=pod.priority, violates_budget=pod.key in violating,
                              why="; ".join(why)))  # fmt: skip
    return GangPreemption(
        gang=context.gang.name,
        hypernode=found.hypernode,
        tier=tree.tier_of(found.hypernode),
        victims=tuple(victims),
        whole_gangs=found.whole_gangs,
        budget_violations=len(violating),
        decision=found.decision,
        hypernodes_tried=tried,
    )
