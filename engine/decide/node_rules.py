"""The node-level rules of one pod, compiled once per decision and asked per node.

These are the rules that do not depend on the devices: readiness, cordon,
the node the pod names, taints and tolerations, node affinity and selector,
host ports, and the node's allocatable resources. They run on single nodes (the device
answer is shared by a whole class of nodes), so they are compiled once per
pod into plain values and kept cheap per call.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from types import MappingProxyType

from engine.cluster.index import ClusterIndex
from engine.core.limits import ScoringStrategy
from engine.core.model import NodeState, PodRequest
from engine.decide.kube.feasible import BaseFeasible
from engine.decide.kube.filters import UNSCHEDULABLE_REASON, CompiledPodRules, NodeFacts, PodFacts
from engine.decide.kube.image_locality import image_sizes
from engine.decide.kube.node_scores import NodeScores
from engine.decide.kube.pod_topology import pod_topology_rules
from engine.decide.kube.ports import UsedPorts
from engine.decide.kube.resources import parse_requests

NOT_READY = "node(s) were not ready"
# A preferred affinity term weighs 1..100; an untolerated PreferNoSchedule taint costs as much as the
# heaviest term, so a node nobody prefers but nobody avoids beats one the pod avoids.
PREFER_NO_SCHEDULE_PENALTY = 100
# A node's own words for the two reasons every node can give (kube's counted words stay in summaries).
_WORDS = MappingProxyType({NOT_READY: "not ready", UNSCHEDULABLE_REASON: "cordoned"})


def pod_facts(request: PodRequest, ignored: Collection[str]) -> PodFacts:
    """What the rules read of a pod; raises RequestError naming a bad field."""
    return PodFacts(
        node_name=request.node_name,
        node_selector=dict(request.node_selector),
        affinity=request.affinity,
        tolerations=tuple(request.tolerations),
        host_ports=tuple(request.host_ports),
        volumes=request.volumes,
        requests={k: v for k, v in parse_requests(request.requests, "requests").items() if k not in ignored},
    )


def pod_cpu_milli(request: PodRequest) -> int:
    """The pod's CPU request in milli-CPU (0: none), read as the node rules read it (RequestError names
    requests.cpu)."""
    cpu = request.requests.get("cpu")
    return 0 if cpu is None else parse_requests({"cpu": cpu}, "requests")["cpu"]


FACTS_BOUND = 65_536  # node states whose rule inputs an engine keeps


class NodeFactsTable:
    """The nodes' rule inputs, parsed once per node state (by identity, bounded): one per engine, with the
    engine's NodeResourcesFit scoring strategy (`scoring`), which its pods' rules read."""

    def __init__(self, scoring: ScoringStrategy | None = None) -> None:
        self.scoring = scoring if scoring is not None else ScoringStrategy()
        self._facts: dict[int, tuple[NodeState, NodeFacts]] = {}

    def of(self, node: NodeState) -> NodeFacts:
        found = self._facts.get(id(node))
        if found is not None and found[0] is node:
            return found[1]
        facts = node_facts(node)
        if len(self._facts) >= FACTS_BOUND:
            self._facts.clear()
        self._facts[id(node)] = (node, facts)
        return facts

    def clear(self) -> None:
        self._facts.clear()


def node_facts(node: NodeState) -> NodeFacts:
    """The node's rule inputs, parsed now."""
    return NodeFacts(
        name=node.name,
        labels=node.labels,
        taints=tuple(node.taints),
        unschedulable=node.unschedulable,
        allocatable=None if node.allocatable is None else parse_requests(node.allocatable, "allocatable"),
        requested=parse_requests(node.requested, "requested"),
        pod_count=node.pods,
        # Parsed with the rest of the node state, once per state: a decision only looks ports up.
        used_ports=UsedPorts(node.host_ports) if node.host_ports else None,
        nonzero_requested=parse_requests(node.nonzero_requested, "nonzero_requested")
        if node.nonzero_requested
        else None,
        image_sizes=image_sizes(node.images) if node.images else None,
        csi_volume_limits=dict(node.csi_volume_limits) if node.csi_volume_limits else None,
        csi_volumes=node.csi_volumes,
    )


class PodRules:
    """One pod's node-level rules."""

    def __init__(
        self,
        request: PodRequest,
        ignored: Collection[str],
        facts: NodeFactsTable | None = None,
        index: ClusterIndex | None = None,
        *,
        device_led: bool = False,
    ) -> None:
        """`ignored`: resources the vendors check (not the node rules); `facts`: the engine's parsed nodes
        (a table of its own when None); `index`: the cluster whose running pods InterPodAffinity and
        PodTopologySpread read (None: those rules are not asked); `device_led`: a device or fragmentation
        policy scores the pod, so InterPodAffinity and PodTopologySpread only break its ties and kube's
        per-node scores (NodeResourcesFit, BalancedAllocation, ImageLocality) do not apply to it."""
        self.nodes = facts if facts is not None else NodeFactsTable()
        ignored = {*ignored, *request.dra_resources}
        self.ignored = tuple(sorted(ignored))  # resources left to the vendors and DRA: part of the base shape
        self.facts = pod_facts(request, ignored)
        self.compiled = CompiledPodRules(self.facts, ignored)
        self.only_node = request.node_name or None
        node_affinity = request.affinity.node_affinity if request.affinity is not None else None
        preferred = node_affinity.preferred_during_scheduling_ignored_during_execution if node_affinity else ()
        self.index = index
        # kube's scores, for a pod whose score no device or fragmentation policy leads (node_scores.py)
        self.node_scores = None if device_led else self._node_scores(request, bool(preferred), index)
        self.max_preference = (
            float(sum(term.weight for term in preferred)) if self.node_scores is None else self.node_scores.ceiling
        )
        self.topology = (
            None
            if index is None
            else pod_topology_rules(
                request, index, self.compiled.affinity, self.facts.tolerations, device_led=device_led
            )
        )

    def _node_scores(self, request: PodRequest, preferred: bool, index: ClusterIndex | None) -> NodeScores:
        """NodeAffinity and TaintToleration are normalised when the pod has preferred terms or a node of
        the cluster a PreferNoSchedule taint the pod does not tolerate (else they score 0 and 100 alike)."""
        # any such taint at all (cheaper than asking which the pod tolerates; tolerated, they normalise to 100)
        tainted = index is not None and index.soft_tainted > 0
        return NodeScores(
            self.facts.requests,
            request.images,
            self.nodes.scoring,
            index,
            preferred=preferred,
            normalises=index is not None and (preferred or tainted),
        )

    @property
    def scores_by_pods(self) -> bool:
        """Scores normalised over the feasible nodes (InterPodAffinity, PodTopologySpread, and for a pod
        without devices NodeAffinity and TaintToleration): call `prepare_scores` before `preference`."""
        return (self.topology is not None and self.topology.scores) or (
            self.node_scores is not None and self.node_scores.normalises
        )

    def prepare_scores(self, feasible: Iterable[str]) -> None:
        """Their scores, normalised over the nodes that pass every filter (as kube-scheduler does)."""
        feasible = list(feasible)
        if self.node_scores is not None and self.node_scores.normalises and self.index is not None:
            facts = [self.nodes.of(self.index.node(name)) for name in feasible]
            self.node_scores.prepare(
                {f.name: self.compiled.preference_score(f) for f in facts},
                {f.name: self.compiled.intolerable_taints(f) for f in facts},
            )
        if self.topology is not None:
            self.max_preference += self.topology.prepare_every(feasible)

    def prepare_from(self, base: BaseFeasible) -> bool:
        """Their scores normalised from `base`'s domains (False: a shape that needs every node asked)."""
        if self.node_scores is not None and self.node_scores.normalises:
            return False  # NodeAffinity and TaintToleration normalise over every feasible node
        ceiling = self.topology.prepare_fast(base) if self.topology is not None else None
        if ceiling is None:
            return False
        self.max_preference += ceiling
        return True

    def passes_base(self, node: NodeState) -> bool:
        """The node passes every node rule but the pods around it (what `base` sets keep)."""
        return node.ready and self.compiled.first_failure(self.nodes.of(node)) is None

    def failure(self, node: NodeState) -> list[str] | None:
        """kube-scheduler's reasons the node is infeasible for the pod (the first failing rule's), or None."""
        if not node.ready:
            return [NOT_READY]
        failed = self.compiled.first_failure(self.nodes.of(node))
        if failed is None and self.topology is not None and self.topology.filters:
            reason = self.topology.failure(node)
            return None if reason is None else [reason]
        return failed

    def preference(self, node: NodeState) -> float:
        """Added to the node's score: for a pod without devices, kube's weighted scores (node_scores.py);
        for a pod a vendor claims, the weights of the preferred affinity terms it matches, less
        PREFER_NO_SCHEDULE_PENALTY per PreferNoSchedule taint the pod does not tolerate."""
        facts = self.nodes.of(node)
        if self.node_scores is not None:
            score = self.node_scores.points(facts)
        else:
            score = self.compiled.preference_score(facts)
            if node.taints:
                score -= PREFER_NO_SCHEDULE_PENALTY * self.compiled.intolerable_taints(facts)
        if self.topology is not None:
            return score + self.topology.point(node.name)
        return float(score)

    @staticmethod
    def in_words(reasons: list[str]) -> str:
        return "; ".join(_WORDS.get(r, r) for r in reasons)
