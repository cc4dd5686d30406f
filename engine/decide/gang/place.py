"""A gang's decision: every pending member placed inside the lowest network domain that holds them all.

    resolve the constraints    the gang's and each subgroup's: hard = never above the allowed tier;
                               soft (or none) = prefer low tiers
    units                      every subGroupPolicy's subgroups (engine.decide.gang.subgroups) and the
                               gang's own members, each in rank order (engine.decide.gang.ranks)
    slots per node             how many members of each shape a node takes: its device class answered
                               again and again (memoised per class), capped by the node's free resources
                               and its node rules; summed per hypernode in one pass over the tree
    the tier walk              from the lowest tier up: the hypernodes of the tier whose slots cover every
                               shape (Volcano's gradient search, pruned by the aggregate); the first tier
                               with a feasible hypernode ends the walk
    a plan per candidate       each subgroup takes the smallest domain within its own limit, then the
                               gang's own members fill the candidate (engine.decide.gang.plan)
    the best candidate         the highest summed device score of the members (link quality, then what
                               the sets leave whole), then the tightest fit (fewest free slots left:
                               Volcano's binpack), then the name — deterministic, never random
    at the minimum             when no domain holds the whole gang and the request allows it, the walk
                               again for a plan of at least minMember members (running ones count) and
                               each policy's minSubGroups; the rest wait, and join later inside the
                               allowed ancestor of the running ones

Members already running (a restarted or partly bound gang) are never placed again: the
search stays inside the highest allowed ancestor of the hypernode they occupy (each subgroup's
likewise), so the answer depends only on what the cluster says, not on the placer's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from engine.cluster.index import ClusterIndex
from engine.cluster.network import CLIQUE_LABEL, NetworkTree, aggregate
from engine.core.model import Mode, PodRequest, WorkloadClass
from engine.decide.gang.answer import decision_of, placed_decision, why_not
from engine.decide.gang.balance import balanced_plan
from engine.decide.gang.claims import CANNOT_ALLOCATE, MAX_ROUNDS, ClaimRules, GangClaims, cut_by_claims, gave_up
from engine.decide.gang.joint import JointRules, ShapeFacts
from engine.decide.gang.plan import MAX_PLANNED, Layout, Plan, UnitLimit, plan_in
from engine.decide.gang.ranks import member_key
from engine.decide.gang.refusals import below_the_running, node_reasons, refusals_text, tier_refusal
from engine.decide.gang.request import GangDecision, GangRequest, TierRefusal
from engine.decide.gang.slots import node_slots, shapes_of
from engine.decide.gang.subgroups import Unit, descendants, leaves, units_of
from engine.decide.gang.tiers import (
    NODE_TIER,
    Pin,
    clique_domains,
    limit_of,
    minimum_candidates,
    most_slots,
    named_domains,
    pin_of,
    tier_candidates,
)
from engine.node.dra import AllocationError, CelPrograms
from engine.node.vendor import RequestError

if TYPE_CHECKING:  # the parts import the gang's slot tables: a type only, to keep the import one way
    from engine.decide.parts import DecisionParts


def place_gang(
    parts: DecisionParts,
    index: ClusterIndex,
    tree: NetworkTree,
    gang: GangRequest,
    mode: Mode = Mode.DEFAULT,
    *,
    workload: tuple[WorkloadClass, ...] = (),
    claims: GangClaims | None = None,
    programs: CelPrograms | None = None,
) -> GangDecision:
    """Every pending member of `gang` placed inside one network domain, or none (with the reason); with
    `gang.minimum_placement`, at least its minimum when the whole gang does not fit. `claims`: the
    members' ResourceClaims, allocated jointly with the choice (engine.decide.gang.claims).

    Raises RequestError(field, reason) for a member, constraint or claim that cannot be read."""
    if claims is None:
        return _search(parts, index, tree, gang, mode, workload, None)
    rules = ClaimRules(claims, programs if programs is not None else CelPrograms())
    try:
        for _ in range(MAX_ROUNDS):
            decision = _search(parts, index, tree, gang, mode, workload, rules)
            if not decision.placed:
                return decision
            nodes = {p.node: index.get(p.node) for p in decision.pods if p.node is not None}
            outcome = rules.allocate_members(decision, {k: v for k, v in nodes.items() if v is not None})
            if isinstance(outcome, GangDecision):
                return outcome
            rules = rules.refined(outcome)
    except AllocationError as exc:
        raise RequestError("claims", str(exc)) from None
    return gave_up(decision, f"gang {gang.name}: {CANNOT_ALLOCATE} of its members ({MAX_ROUNDS} searches)")


def _search(
    parts: DecisionParts,
    index: ClusterIndex,
    tree: NetworkTree,
    gang: GangRequest,
    mode: Mode,
    workload: tuple[WorkloadClass, ...],
    rules: ClaimRules | None,
) -> GangDecision:
    """One search of the tier walk (the module docstring); `rules`: the members' claims cut their slots."""
    pending = sorted((p for p in gang.pods if not p.node_name), key=member_key)
    running = sorted((p for p in gang.pods if p.node_name), key=member_key)
    sub_units, own = units_of(gang.sub_groups, pending, running)
    unit_of = {p.uid: leaf.name for u in sub_units for leaf in leaves(u) for p in (*leaf.pending, *leaf.running)}
    if not pending:
        reason = "every member is running"
        return decision_of(gang, tree, index, [], {}, running, placed=True, reason=reason, unit_of=unit_of)
    mode_hard, max_tier = limit_of(tree, gang.network, "network")
    units = [(u, _unit_limit(tree, u)) for u in sub_units]
    own_limit = UnitLimit(hard=mode_hard, tier=max_tier)
    if max_tier == NODE_TIER:  # the gang on one node: its own members' limit; the walk looks everywhere
        own_limit = _unit_limit(tree, msgspec.structs.replace(own, network=gang.network))
        mode_hard, max_tier = False, tree.tiers[-1]
    child_limits = {c.name: _unit_limit(tree, c) for u in sub_units for c in descendants(u)}
    units.append((own, own_limit))
    within = named_domains(tree, gang.network)
    domain = rules.claims.compute_domain if rules is not None else ""
    if domain:  # a ComputeDomain's pods: inside one NVLink clique, whatever else the gang allows
        cliques = clique_domains(tree)
        if cliques is None:
            head = f"gang {gang.name}: ComputeDomain {domain} keeps its pods in one NVLink clique"
            reason = f"{head}; no node has {CLIQUE_LABEL}"
            return _unplaced(gang, tree, index, pending, running, reason, 0, unit_of)
        mode_hard, max_tier, within = True, cliques[0], cliques[1]
    signature = rules.signature if rules is not None else None
    shapes = shapes_of(parts.slots, parts.vendors, parts.facts, pending, mode, workload, index, signature)
    shape_of = {m.uid: s.key for s in shapes for m in s.members}
    pin = msgspec.structs.replace(pin_of(tree, running, mode_hard, max_tier), within=within)
    joint = JointRules(index, [ShapeFacts(s.key, s.request, s.rules, index) for s in shapes])
    joint_rules = joint if joint.joint else None
    per_node, fits, misses = node_slots(parts.slots, index, tree, shapes, joint_rules)
    if rules is not None:
        cut_by_claims(rules, index, tree, shapes, per_node, fits, misses)
    totals = {key: aggregate(tree, values) for key, values in per_node.items()}
    need = {shape.key: len(shape.members) for shape in shapes}

    def layout(hypernode: str) -> Layout:
        return Layout(tree, hypernode, shape_of, per_node, fits, pin.lca, joint.placed() if joint_rules else None)

    balanced = None if running or joint_rules else balanced_plan(tree, gang, shapes, per_node, fits)
    if balanced is not None:  # Kueue's balanced placement; where it finds none, Kueue's fallback: the walk
        return placed_decision(gang, tree, index, shapes, balanced, fits, running, 0, unit_of=unit_of)
    walk = _Walk(tree, pin, mode_hard, max_tier, totals, need, layout, units)
    walk.child_limits = child_limits
    best = walk.run(least=0)
    least = max(gang.min_member - len(running), 1)
    short = ""
    if best is None and gang.minimum_placement and least < len(pending):
        best = walk.run(least=least, min_sub_groups=tuple(p.min_sub_groups for p in gang.sub_groups))
        short = f"gang {gang.name}: placed at its minimum; the other pending member(s) wait for room"
    refused = tuple(walk.refused)
    if best is not None:
        decision = placed_decision(
            gang, tree, index, shapes, best, fits, running, walk.planned, unit_of=unit_of, partial=short
        )
        below = tuple(r for r in refused if decision.tier is None or r.tier < decision.tier)
        return msgspec.structs.replace(decision, refused_tiers=below)
    allowed_tiers = [t for t in tree.tiers if not mode_hard or t <= max_tier]
    best_slots = max((most_slots(tree, t, totals, need) for t in allowed_tiers), default=0)
    reasons = node_reasons(index, tree, per_node[shapes[0].key], misses, max_tier if mode_hard else None)
    reason = why_not(index, gang, reasons, mode_hard, max_tier, best_slots, need, refusals_text(refused))
    if domain:
        reason = _clique_reason(gang.name, domain, tree, max_tier, totals, need, reason)
    return _unplaced(gang, tree, index, pending, running, reason, walk.planned, unit_of, refused)


def _unplaced(
    gang: GangRequest,
    tree: NetworkTree,
    index: ClusterIndex,
    pending: list[PodRequest],
    running: list[PodRequest],
    reason: str,
    planned: int,
    unit_of: dict[str, str],
    refused: tuple[TierRefusal, ...] = (),
) -> GangDecision:
    """The gang unplaced, with the reason and the tiers refused on the way."""
    decision = decision_of(
        gang, tree, index, pending, {}, running, placed=False, reason=reason, planned=planned, unit_of=unit_of
    )
    return msgspec.structs.replace(decision, refused_tiers=refused)


def _clique_reason(
    name: str,
    domain: str,
    tree: NetworkTree,
    tier: int,
    totals: dict[bytes, tuple[int, ...]],
    need: dict[bytes, int],
    reason: str,
) -> str:
    """A ComputeDomain's gang that no clique holds: the roomiest clique named, then kube's per-node counts."""
    rooms = sorted(
        (-sum(min(totals[key][tree.hypernode_index(h)], n) for key, n in need.items()), h)
        for h in tree.hypernodes_at(tier)
    )
    roomiest = f" (the roomiest, {rooms[0][1]}, takes {-rooms[0][0]})" if rooms else ""
    head = (
        f"gang {name}: ComputeDomain {domain} keeps its pods in one NVLink clique ({CLIQUE_LABEL}) and none holds"
        f" its {sum(need.values())} pending member(s){roomiest}"
    )
    kube = reason.partition("; ")[2]
    return f"{head}; {kube}" if kube else head


def _unit_limit(tree: NetworkTree, unit: Unit) -> UnitLimit:
    """A subgroup's own limit, and (hard) the domain its running members allow the rest."""
    hard, tier = limit_of(tree, unit.network, f"subGroupPolicy[{unit.policy}].networkTopology")
    allowed = pin_of(tree, unit.running, hard, tier).domain if hard else None
    return UnitLimit(hard=hard, tier=tier, allowed=allowed, within=named_domains(tree, unit.network))


class _Walk:
    """The tier walk over one gang's candidates (see the module docstring); counts the plans it makes."""

    def __init__(
        self,
        tree: NetworkTree,
        pin: Pin,
        hard: bool,
        max_tier: int,
        totals: dict[bytes, tuple[int, ...]],
        need: dict[bytes, int],
        layout: Callable[[str], Layout],
        units: Sequence[tuple[Unit, UnitLimit]],
    ) -> None:
        self.tree, self.pin, self.hard, self.max_tier = tree, pin, hard, max_tier
        self.totals, self.need, self.layout, self.units = totals, need, layout, units
        self.planned = 0
        self.child_limits: dict[str, UnitLimit] = {}  # nested subgroups' own limits, by unit name
        self.refused: list[TierRefusal] = []  # the whole gang's walk: each tier it went past, and why

    def run(self, *, least: int, min_sub_groups: tuple[int, ...] = ()) -> Plan | None:
        """The best plan of the lowest tier that has one: the whole gang (`least` 0), or at least `least`."""
        tree, pin = self.tree, self.pin
        for tier in tree.tiers:
            if self.hard and tier > self.max_tier:
                break
            if pin.lca is not None and tier < tree.tier_of(pin.lca):
                if not least:
                    self.refused.append(below_the_running(tree, tier, pin.lca))
                continue
            if least:
                candidates = minimum_candidates(tree, tier, pin, self.totals, self.need, least)
            else:
                candidates = tier_candidates(tree, tier, pin, self.totals, self.need)
            plans: list[Plan] = []
            for hypernode in candidates[:MAX_PLANNED]:
                self.planned += 1
                plan = plan_in(
                    self.layout(hypernode),
                    self.units,
                    partial=bool(least),
                    minimum=least,
                    min_sub_groups=min_sub_groups,
                    child_limits=self.child_limits,
                )
                if plan is not None:
                    plans.append(plan)
            if plans:
                return min(plans, key=lambda p: (-p.placed, -p.score, p.free_after, p.hypernode))
            if not least:
                planned = min(len(candidates), MAX_PLANNED)
                self.refused.append(tier_refusal(tree, tier, pin, self.totals, self.need, candidates, planned))
        return None
