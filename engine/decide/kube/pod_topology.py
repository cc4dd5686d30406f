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

from collections.abc import Callable, Iterable, Mapping, Sequence

from engine.cluster.index import ClusterIndex
from engine.core.model import NodeState, PodRequest
from engine.decide.kube.affinity import NodeAffinityRules
from engine.decide.kube.bounds import Feasible, PluginPoints, affinity_points, blocked_domains, spread_points
from engine.decide.kube.feasible import BaseFeasible
from engine.decide.kube.interpod import InterPodAffinity, normalized, raw_score
from engine.decide.kube.spread import Constraint, PodTopologySpread
from engine.decide.kube.taints import first_untolerated
from schemas.kube import Toleration

INTER_POD_AFFINITY_WEIGHT = 2  # kube-scheduler's default plugin weights
POD_TOPOLOGY_SPREAD_WEIGHT = 2
PointOf = Callable[[str], int]
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
        self._lazy: tuple[PointOf | None, PointOf | None] | None = None  # (affinity, spread) from `prepare_fast`
        self._plugins: tuple[PluginPoints | None, PluginPoints | None] = (None, None)  # from `prepare_fast`
        self.ceiling = 0.0  # the most points a feasible node can have (after `prepare_fast`)
        self.own: frozenset[str] = frozenset()  # nodes whose points read their own pods, not only domains

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

    def prepare_fast(self, base: BaseFeasible) -> float | None:
        """Both plugins' normalisation from the base feasible set's domains (engine/decide/kube/bounds.py);
        returns the most points a feasible node can have, or None where the rules' shape is not covered."""
        blocked = blocked_domains(self.spread, self.inter_pod)
        if blocked is None:
            return None
        feasible = Feasible(base, self.index.pods, blocked)
        affinity = spread = None
        ceiling = 0
        if self._affinity_scores:
            affinity = affinity_points(self._affinity_scores, self.index.pods, feasible)
            if affinity is None:
                return None
            ceiling += INTER_POD_AFFINITY_WEIGHT * affinity[1]
        if self.spread is not None and self.spread.soft:
            spread = spread_points(self.spread, feasible)
            if spread is None:
                return None
            ceiling += POD_TOPOLOGY_SPREAD_WEIGHT * spread[1]
        self._lazy = (affinity[0] if affinity else None, spread[0] if spread else None)
        self._plugins = (affinity, spread)
        self.own = frozenset().union(*(p.own for p in self._plugins if p is not None))
        self.points = {}
        self.ceiling = self.scale * ceiling
        return self.ceiling

    def domain_points(self, domain: Mapping[str, str]) -> float:
        """The points of a feasible node not in `own` whose labels include `domain` (after `prepare_fast`;
        `ceiling` where the domain does not tell them): every such node has exactly these."""
        total = 0
        for plugin, weight in zip(self._plugins, (INTER_POD_AFFINITY_WEIGHT, POD_TOPOLOGY_SPREAD_WEIGHT), strict=True):
            if plugin is not None:
                points = plugin.of_domain(domain)
                if points is None:
                    return self.ceiling
                total += weight * points
        return self.scale * total

    def point(self, name: str) -> float:
        """The feasible node's weighted points (after `prepare_fast` or `prepare_every`)."""
        found = self.points.get(name)
        if found is not None or self._lazy is None:
            return found or 0.0
        affinity, spread = self._lazy
        found = self.points[name] = self.scale * (
            INTER_POD_AFFINITY_WEIGHT * (affinity(name) if affinity else 0)
            + POD_TOPOLOGY_SPREAD_WEIGHT * (spread(name) if spread else 0)
        )
        return found

    def prepare_every(self, feasible: Iterable[str]) -> float:
        """Both plugins' weighted scores of every feasible node, normalised over them all (the
        straightforward way); returns the highest."""
        names = list(feasible)
        affinity: dict[str, int] = {}
        if self._affinity_scores:
            labels_of = self.index.pods.labels_of
            raw = {n: raw_score(self._affinity_scores, labels_of(n)) for n in names}
            affinity = normalized(raw, names)
        spread = self.spread.scores(names) if self.spread is not None else {}
        self._lazy = None
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
