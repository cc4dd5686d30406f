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

from typing import TYPE_CHECKING

from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree, aggregate
from engine.core.model import Mode, WorkloadClass
from engine.decide.gang.answer import decision_of, placed_decision, why_not
from engine.decide.gang.plan import MAX_PLANNED, Plan, plan_in
from engine.decide.gang.request import GangDecision, GangRequest
from engine.decide.gang.slots import node_slots, shapes_of
from engine.decide.gang.tiers import limit_of, most_slots, pin_of, tier_candidates

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
) -> GangDecision:
    """Every pending member of `gang` placed inside one network domain, or none (with the reason).

    Raises RequestError(field, reason) for a member or constraint that cannot be read."""
    pending = sorted((p for p in gang.pods if not p.node_name), key=lambda p: (p.name, p.uid))
    running = [p for p in gang.pods if p.node_name]
    if not pending:
        return decision_of(gang, tree, index, [], {}, running, placed=True, reason="every member is running")
    mode_hard, max_tier = limit_of(tree, gang.network, "network")
    shapes = shapes_of(parts.slots, parts.vendors, parts.facts, pending, mode, workload)
    pin = pin_of(tree, running, mode_hard, max_tier)
    per_node, fits, misses = node_slots(parts.slots, index, tree, shapes)
    totals = {key: aggregate(tree, values) for key, values in per_node.items()}
    need = {shape.key: len(shape.members) for shape in shapes}
    planned = 0
    for tier in tree.tiers:
        if mode_hard and tier > max_tier:
            break
        if pin.lca is not None and tier < tree.tier_of(pin.lca):
            continue
        candidates = tier_candidates(tree, tier, pin, totals, need)
        if not candidates:
            continue
        plans: list[Plan] = []
        for hypernode in candidates[:MAX_PLANNED]:
            planned += 1
            plan = plan_in(tree, hypernode, shapes, per_node, fits, gang.sub_groups, pin.lca)
            if plan is not None:
                plans.append(plan)
        if plans:
            best = min(plans, key=lambda p: (-p.score, p.free_after, p.hypernode))
            return placed_decision(gang, tree, index, shapes, best, fits, running, planned)
    allowed_tiers = [t for t in tree.tiers if not mode_hard or t <= max_tier]
    best_slots = max((most_slots(tree, t, totals, need) for t in allowed_tiers), default=0)
    reason = why_not(index, gang, misses, mode_hard, max_tier, best_slots, need)
    return decision_of(gang, tree, index, pending, {}, running, placed=False, reason=reason, planned=planned)
