"""Pods InterPodAffinity or PodTopologySpread score: their normalisation read from domains, not nodes.

kube-scheduler normalises both plugins' scores over the nodes that pass every filter, so a decision
for such a pod asked every node before its walk (some 25 to 50 ms at 10,000 nodes). Here the nodes
that pass the other rules are kept per base shape across decisions (kube/feasible.py), the
normalisation comes from their counts per domain (kube/bounds.py), and the usual walk then asks
only the nodes it compares: the best device classes first for a pod a vendor claims (its device
score leads), the nodes by name for one no vendor claims (every node scores 0 there; the first that
reaches the most points a feasible node can have ends the walk).
"""

from __future__ import annotations

import msgspec

from engine.cluster.index import ClusterIndex
from engine.core.model import Mode, NodeState
from engine.decide.claim import NO_DEVICES, Claim
from engine.decide.kube.feasible import BaseFeasible
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


def best_by_name(index: ClusterIndex, rules: PodRules) -> tuple[float, str, Group] | None:
    """For a pod no vendor claims (device score 0 everywhere): the feasible node with the most points,
    ties to the first name; the first to reach the most any node can have ends the walk."""
    ceiling = rules.max_preference
    best: tuple[float, str, Group] | None = None
    for name in index.names:
        node = index.node(name)
        if rules.failure(node) is not None:
            continue
        total = rules.preference(node)
        if best is None or total > best[0]:
            best = (total, name, (NO_DEVICES, (name,)))
            if total >= ceiling:
                break
    return best
