"""One pod's decision over the cluster index: class answers, ranked, then node rules, best first.

    for each device class:       the vendor's answer, memoised — a fit with its node score, or why not
    rank the fitting classes:    higher score first
    walk them, best first:       within a class, nodes in name order; the first that passes the pod's
                                 node rules (node_rules.py) is the class's best (with preferences, the
                                 best by score + preference); stop once no later class can reach the best
    nothing passes:              every node's reason, counted as kube-scheduler does

The result is the same as asking every node and sorting by (-score, name), which
bench/reference_loop.py does and a test compares, at a cost that depends on the number
of classes, not of nodes. Explanations of the losers are built only when asked.

    claim.py        the vendor that reads the pod, and its parsed request
    ranking.py      class answers, their ranking per index, the walk to the best node
    explanation.py  why the others lost or cannot host the pod
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec

from engine.cluster.index import ClusterIndex
from engine.core.model import Decision, Mode, NodeState, PodRequest, WorkloadClass
from engine.decide.claim import claim
from engine.decide.explanation import (
    all_warnings,
    best_runners_up,
    every_alternative,
    explainer,
    fitting_in_order,
    unschedulable_decision,
)
from engine.decide.node_rules import PodRules
from engine.decide.parts import DecisionParts
from engine.decide.ranking import (
    Group,
    best_of_groups,
    fast_best,
    fast_ranking,
    groups_of,
)
from engine.decide.scored import best_by_resources, prepare_from_domains
from engine.node.answer import NodeFit
from schemas.events import DeviceAssignment


def place_indexed(
    parts: DecisionParts,
    index: ClusterIndex,
    request: PodRequest,
    mode: Mode = Mode.DEFAULT,
    *,
    workload: tuple[WorkloadClass, ...] = (),
    explain: bool = False,
    allowed: Callable[[str], bool] | None = None,
    runners_up: int = 0,
) -> Decision:
    """The best node and devices for `request` among the index's nodes (`allowed`: a further node filter).

    `explain` lists every other node with why it lost; `runners_up` (without `explain`) lists only
    the best few other nodes that fit, as the first entries of the explanation would, at the cost
    of walking the ranking a little further.

    Raises RequestError(field, reason) when the request cannot be read."""
    pod_claim = claim(parts.vendors, request, mode, workload, cpu=index.reads.resources)
    # Where the device or fragmentation policy scores (a vendor claims the pod), its score leads.
    rules = PodRules(
        request, parts.vendors.share_resources, parts.facts, index, device_led=pod_claim.plugin is not None
    )
    groups: list[Group] = []
    simple = not (explain or allowed is not None or runners_up or rules.only_node is not None)
    from_domains = False
    if rules.scores_by_pods:  # scores normalised over the feasible nodes: from their domains, or every node
        from_domains = simple and prepare_from_domains(parts, index, pod_claim, rules, mode)
        if not from_domains:
            groups = groups_of(parts.classes, index, pod_claim, mode)
            rules.prepare_scores(feasible_names(index, groups, rules, allowed))
    ranked = None if explain or groups else fast_ranking(parts.classes, index, pod_claim, mode)
    if pod_claim.plugin is None and simple and not groups and rules.node_scores is not None:
        best = best_by_resources(parts, index, rules)  # kube's scores by resource class, best first
    elif ranked is None:
        groups = groups or groups_of(parts.classes, index, pod_claim, mode)
        best = best_of_groups(index, groups, rules, allowed)
    else:
        best = fast_best(ranked, index, rules, allowed)
    explain_node = explainer(parts.node, pod_claim, mode)
    if best is None:
        groups = groups or groups_of(parts.classes, index, pod_claim, mode)
        return unschedulable_decision(index, groups, rules, allowed, explain_node if explain else None)
    total, name, group = best
    fit = group[0]
    assert isinstance(fit, NodeFit)
    node = index.node(name)
    score_parts = dict(fit.choice.parts)
    score_parts.update(fit.score.parts)
    preference = total - fit.score.score
    if preference:
        score_parts["preference"] = preference
    device_request = pod_claim.request
    return Decision(
        node=name,
        devices=_with_uuids(fit.choice.assignments, node),
        score=round(total, 6),
        score_parts=score_parts,
        alternatives=(
            every_alternative(index, groups, rules, name, fit, total, explain_node)
            if explain
            else best_runners_up(
                index, fitting_in_order(index, ranked, groups), rules, allowed, name, fit, total, runners_up
            )
            if runners_up > 0
            else ()
        ),
        candidates_considered=fit.choice.considered,  # the winner's search; the others' cost nothing new
        warnings=all_warnings(index, groups) if explain else tuple(f"{name}: {w}" for w in fit.warnings),
        qos=device_request.qos if device_request is not None else "",
        app_class=device_request.app_class if device_request is not None else "",
    )


def feasible_names(
    index: ClusterIndex, groups: list[Group], rules: PodRules, allowed: Callable[[str], bool] | None
) -> Iterator[str]:
    """The nodes whose devices fit and that pass every node rule (and `allowed`)."""
    for answer, members in groups:
        if answer.__class__ is not NodeFit:
            continue
        for name in members:
            if (allowed is None or allowed(name)) and rules.failure(index.node(name)) is None:
                yield name


def _with_uuids(assignments: tuple[DeviceAssignment, ...], node: NodeState) -> tuple[DeviceAssignment, ...]:
    """The class answer's shares on this node's own devices (a class answer carries no UUIDs)."""
    uuids = {d.index: d.uuid for d in node.devices}
    return tuple(
        a if a.uuid == uuids.get(a.index, a.uuid) else msgspec.structs.replace(a, uuid=uuids.get(a.index, ""))
        for a in assignments
    )
