"""Pods InterPodAffinity or PodTopologySpread score: their normalisation read from domains, not nodes.

kube-scheduler normalises both plugins' scores over the nodes that pass every filter, so a decision
for such a pod asked every node before its walk (some 25 to 50 ms at 10,000 nodes). Here the nodes
that pass the other rules are kept per base shape across decisions (kube/feasible.py), the
normalisation comes from their counts per domain (kube/bounds.py), and the usual walk then asks
only the nodes it compares: the best device classes first for a pod a vendor claims (its device
score leads), the best resource classes first for one no vendor claims (below).

For a pod no vendor claims (with or without topology scores), kube's per-node resource scores
(NodeResourcesFit, BalancedAllocation) read only a node's amounts, so the walk takes the index's
resource classes best points first (kube/resource_ranking.py): a class's nodes can have at most its
resource points plus the most of the other scores, and a node without pods of its own that the
topology scores count has exactly the topology points of its zone or region (the class's). The
nodes with such pods are asked first; a class that cannot beat the best found is passed over, and the
walk ends once no later class can.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine.cluster.index import ClusterIndex
from engine.core.model import Mode, NodeState
from engine.decide.claim import NO_DEVICES, Claim
from engine.decide.kube.feasible import BaseFeasible
from engine.decide.kube.node_scores import NodeScores
from engine.decide.kube.resource_ranking import ResourceRanking
from engine.decide.node_rules import PodRules
from engine.decide.parts import DecisionParts
from engine.decide.ranking import Group
from engine.node.answer import NodeFit


def prepare_from_domains(
    parts: DecisionParts, index: ClusterIndex, pod_claim: Claim, rules: PodRules, mode: Mode
) -> bool:
    """The pod's topology scores prepared without asking every node (False: ask every node instead)."""
    if rules.facts.volumes is not None:
        return False  # volume rules read claims and volumes beyond the node
    plugin, device_request = pod_claim.plugin, pod_claim.request
    request_id = -1
    if plugin is not None and device_request is not None:
        found = parts.classes.node.request_id_of(plugin, device_request, mode)
        if device_request.reads_uuids or found is None:
            return False
        request_id = found
        table = parts.classes.table(index, request_id)
        evaluate = parts.classes.node.evaluate

        def fits(node: NodeState) -> bool:
            class_id = index.class_id(node.name)
            answer = table.get(class_id)
            if answer is None:
                answer = table[class_id] = evaluate(plugin, device_request, index.class_state(class_id), mode)
            return answer.__class__ is NodeFit and rules.passes_base(node)

    else:

        def fits(node: NodeState) -> bool:
            return rules.passes_base(node)

    shape = msgspec.json.encode((request_id, mode.value, rules.ignored, rules.facts))
    if parts.classes.memo.enabled:
        base = parts.feasible.of(index, shape, fits)
    else:
        base = BaseFeasible()
        base.sync(index, fits)
    return rules.prepare_from(base)


Best = tuple[float, str, Group]


def best_by_resources(parts: DecisionParts, index: ClusterIndex, rules: PodRules) -> Best | None:
    """For a pod no vendor claims whose topology scores (if any) are prepared from domains: the feasible
    node with the most points, ties to the first name: the answer of asking every node."""
    scores = rules.node_scores
    assert scores is not None  # a pod no vendor claims has kube's node scores
    classes = index.resources

    def points_of(class_id: int) -> int:
        return scores.resource_points(rules.nodes.of(index.node(classes.members(class_id)[0])))

    if parts.classes.memo.enabled:
        ranking = parts.resource_rankings.of(index, resource_shape(scores), points_of)
    else:
        ranking = ResourceRanking()
        ranking.sync(classes, points_of)
    topology = rules.topology
    own = topology.own if topology is not None else frozenset()
    rest = rules.max_preference - scores.resource_ceiling  # the other scores' most, own nodes' included
    rest_no_topology = rest - (topology.ceiling if topology is not None else 0.0)
    best: Best | None = None
    for name in sorted(own):  # their topology points read their own pods: asked one by one
        best = _better(index, rules, name, best)
    at = 0
    while at < len(ranking.ranked):
        negative, class_id = ranking.ranked[at]
        members = classes.members(class_id)
        if not members:
            ranking.forget(at)  # no node has this class any more
            continue
        at += 1
        points = -negative
        if best is not None and points + rest < best[0]:
            break  # best points first: no later class can reach the best
        reach = points + rest_no_topology
        if topology is not None:
            reach += topology.domain_points(classes.domain(class_id))
        if best is not None and (reach < best[0] or (reach == best[0] and members[0] > best[1])):
            continue
        best = _best_of_class(index, rules, members, own, reach, best)
    return best


def _best_of_class(
    index: ClusterIndex, rules: PodRules, members: Sequence[str], own: frozenset[str], reach: float, best: Best | None
) -> Best | None:
    """The class's nodes (but `own`) in name order against the best so far; the first to `reach` ends it."""
    for name in members:
        if name in own:
            continue
        node = index.node(name)
        if rules.failure(node) is not None:
            continue
        total = rules.preference(node)
        if best is None or total > best[0] or (total == best[0] and name < best[1]):
            best = (total, name, (NO_DEVICES, (name,)))
        if total >= reach:
            break  # names come sorted: nobody later in this class does better
    return best


def _better(index: ClusterIndex, rules: PodRules, name: str, best: Best | None) -> Best | None:
    """`best`, or the node where it passes and does better."""
    node = index.get(name)
    if node is None or rules.failure(node) is not None:
        return best
    total = rules.preference(node)
    if best is None or total > best[0] or (total == best[0] and name < best[1]):
        return (total, name, (NO_DEVICES, (name,)))
    return best


def resource_shape(scores: NodeScores) -> bytes:
    """What a class's resource points read of the pod: its request and the scoring strategy."""
    return msgspec.json.encode((scores.strategy, sorted(scores.requests.items())))
