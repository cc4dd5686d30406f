"""The rules that read the pods running around a node: PodTopologySpread, then InterPodAffinity.

kube-scheduler runs PodTopologySpread's filter before InterPodAffinity's (both after
NodeResourcesFit); a node's check stops at the first that fails. Their scores are
normalised over the nodes that pass every filter (and the device answer), so they are
made once those are known (`prepare`), each 0..100 times kube-scheduler's default
weight (2 and 2), and added to a node's score as the node-affinity preferences are. Where a
device or fragmentation policy scores the pod, its score leads: the plugins' points only break
its ties (scaled by DEVICE_LED_SCALE below the device scores' last digit).
A pod that has no pod (anti-)affinity and no spread constraints, on a cluster whose
running pods have no pod (anti-)affinity, builds nothing here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.cluster.index import ClusterIndex
from engine.core.model import NodeState, PodRequest
from engine.decide.kube.affinity import NodeAffinityRules
from engine.decide.kube.interpod import InterPodAffinity, normalized, raw_score
from engine.decide.kube.spread import Constraint, PodTopologySpread
from engine.decide.kube.taints import first_untolerated
from schemas.kube import Toleration

INTER_POD_AFFINITY_WEIGHT = 2  # kube-scheduler's default plugin weights
POD_TOPOLOGY_SPREAD_WEIGHT = 2
# Device scores are rounded to 6 digits (engine/node/policy.py DIGITS), so two that differ do so by
# 1e-6 or more; 400 points (both plugins at 100, weight 2) times this stay under half of that: they
# never reorder different device scores, nor change a score as reported (rounded to 6 digits).
DEVICE_LED_SCALE = 1e-9


class PodTopologyRules:
    """One pod's InterPodAffinity and PodTopologySpread over one index."""

    def __init__(
        self,
        request: PodRequest,
        index: ClusterIndex,
        node_affinity: NodeAffinityRules,
        tolerations: Sequence[Toleration],
        *,
        device_led: bool = False,
    ) -> None:
        self.index = index
        self.scale = DEVICE_LED_SCALE if device_led else 1.0
        self.node_affinity = node_affinity
        self.tolerations = tolerations
        self.inter_pod = InterPodAffinity(request, index.pods)
        spreads = bool(request.topology_spread_constraints) or request.default_spread_selector is not None
        self.spread = PodTopologySpread(request, index.pods, self._included) if spreads else None
        self.filters = self.inter_pod.filters or (self.spread is not None and bool(self.spread.hard))
        self._affinity_scores = self.inter_pod.topology_scores()
        self.scores = bool(self._affinity_scores) or (self.spread is not None and bool(self.spread.soft))
        self.points: dict[str, float] = {}

    def _included(self, constraint: Constraint, name: str) -> bool:
        """The constraint's nodeAffinityPolicy and nodeTaintsPolicy (Honor: the node must pass them)."""
        node = self.index.get(name)
        if node is None:
            return False
        if constraint.honor_affinity and not self.node_affinity.required_matches(name, node.labels):
            return False
        return not (constraint.honor_taints and node.taints and first_untolerated(node.taints, self.tolerations))

    def failure(self, node: NodeState) -> str | None:
        if self.spread is not None and self.spread.hard:
            reason = self.spread.failure(node.labels)
            if reason is not None:
                return reason
        return self.inter_pod.failure(node.labels) if self.inter_pod.filters else None

    def prepare(self, feasible: Iterable[str]) -> float:
        """Both plugins' weighted scores of the feasible nodes; returns the highest."""
        names = list(feasible)
        affinity: dict[str, int] = {}
        if self._affinity_scores:
            labels_of = self.index.pods.labels_of
            raw = {n: raw_score(self._affinity_scores, labels_of(n)) for n in names}
            affinity = normalized(raw, names)
        spread = self.spread.scores(names) if self.spread is not None else {}
        scale = self.scale
        self.points = {
            n: scale * (INTER_POD_AFFINITY_WEIGHT * affinity.get(n, 0) + POD_TOPOLOGY_SPREAD_WEIGHT * spread.get(n, 0))
            for n in names
        }
        return max(self.points.values(), default=0.0)


def pod_topology_rules(
    request: PodRequest,
    index: ClusterIndex,
    node_affinity: NodeAffinityRules,
    tolerations: Sequence[Toleration],
    *,
    device_led: bool = False,
) -> PodTopologyRules | None:
    """The pod's rules, or None when neither plugin has anything to do for it (`device_led`: a device or
    fragmentation policy scores the pod, and the plugins' points only break its ties)."""
    asks = (
        (request.affinities is not None and not request.affinities.empty)
        or bool(request.topology_spread_constraints)
        or request.default_spread_selector is not None
    )
    if not asks and not index.pods.has_pods_with_affinity:
        return None
    rules = PodTopologyRules(request, index, node_affinity, tolerations, device_led=device_led)
    return rules if rules.filters or rules.scores else None
