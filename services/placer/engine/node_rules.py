"""The node-level rules of one pod, compiled once per decision and asked per node.

These are the rules that do not depend on the devices: readiness, cordon,
the node the pod names, taints and tolerations, node affinity and selector,
and the node's allocatable resources. They run on single nodes (the device
answer is shared by a whole class of nodes), so they are compiled once per
pod into plain values and kept cheap per call.
"""

from __future__ import annotations

from collections.abc import Collection

from services.placer.engine.kube.filters import CompiledPodRules, NodeFacts, PodFacts
from services.placer.engine.kube.objects import Taint
from services.placer.engine.kube.resources import parse_requests
from services.placer.engine.model import NodeState, PodRequest

NOT_READY = "node(s) were not ready"
NOT_READY_REASON = "not ready"


def pod_facts(request: PodRequest, ignored: Collection[str]) -> PodFacts:
    """What the rules read of a pod; raises RequestError naming a bad field."""
    return PodFacts(
        node_name=request.node_name or None,
        node_selector=dict(request.node_selector),
        affinity=request.affinity,
        tolerations=tuple(request.tolerations),
        requests={k: v for k, v in parse_requests(request.requests, "requests").items() if k not in ignored},
    )


_facts_memo: dict[int, tuple[NodeState, NodeFacts]] = {}


def node_facts(node: NodeState) -> NodeFacts:
    """The node's rule inputs, parsed once per node state (memoised by identity, bounded)."""
    found = _facts_memo.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    facts = NodeFacts(
        name=node.name,
        labels=node.labels,
        taints=tuple(node.taints),
        unschedulable=node.unschedulable,
        allocatable=None if node.allocatable is None else parse_requests(node.allocatable, "allocatable"),
        requested=parse_requests(node.requested, "requested"),
        pod_count=node.pods,
    )
    if len(_facts_memo) >= 65_536:
        _facts_memo.clear()
    _facts_memo[id(node)] = (node, facts)
    return facts


class PodRules:
    """One pod's node-level rules."""

    def __init__(self, request: PodRequest, ignored: Collection[str]) -> None:
        self.facts = pod_facts(request, ignored)
        self.compiled = CompiledPodRules(self.facts)
        self.only_node = request.node_name or None
        self.max_preference = float(self.compiled.max_preference_score())

    def failure(self, node: NodeState) -> list[str] | None:
        """kube-scheduler's reasons the node is infeasible for the pod (the first failing rule's), or None."""
        if not node.ready:
            return [NOT_READY]
        return self.compiled.first_failure(node_facts(node))

    def preference(self, node: NodeState) -> float:
        """Score added for preferred affinity, taken for untolerated PreferNoSchedule taints."""
        return float(self.compiled.preference_score(node_facts(node)))


def describe_taint(taint: Taint) -> str:
    return f"{{{taint.key}: {taint.value}}}"
