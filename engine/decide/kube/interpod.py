"""Inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity plugin filters and scores.

Filter (pkg/scheduler/framework/plugins/interpodaffinity/filtering.go), per node, first failure wins:

    "node(s) didn't match pod affinity rules"      a required affinity term's topology key is missing on
        the node, or no counted pod is in the node's domain of some term. Pods are counted for affinity
        only when they match *every* required affinity term. Exception: the first pod of a group that
        is affine to itself (no pod anywhere counts, and the pod matches all its own terms) may go to
        any node that has every term's topology key.
    "node(s) didn't match pod anti-affinity rules"  a pod matching a required anti-affinity term runs in
        the node's domain of that term.
    "node(s) didn't satisfy existing pods anti-affinity rules"  a running pod's required anti-affinity
        term matches this pod (its namespaces or namespaceSelector, its selector), and that running
        pod's domain for the term is the node's.

Score (scoring.go): per topology key and value, the sum over running pods of
    + weight        the pod's preferred affinity terms each running pod matches
    - weight        the pod's preferred anti-affinity terms each running pod matches
    + 1             running pods' required affinity terms this pod matches (hardPodAffinityWeight)
    +/- weight      running pods' preferred affinity / anti-affinity terms this pod matches
each added to the domain of the running pod's node; a node's raw score is the sum over the keys of its
domains' sums, normalised over the feasible nodes to 100 * (raw - min) / (max - min), truncated.

The counts come from the cluster index's label groups (engine/cluster/pods.py), never from a walk over
every running pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from engine.cluster.pods import LabelGroup, PodTopologyIndex, TermKind
from engine.core.labels import AffinityTerm, Labels, affinity_term
from engine.core.model import PodRequest
from schemas.kube import PodAffinityRules

INTER_POD_AFFINITY = "InterPodAffinity"
AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_POD_AFFINITY_WEIGHT = 1  # kube-scheduler's default (InterPodAffinityArgs.hardPodAffinityWeight)
MAX_NODE_SCORE = 100

TopologyPair = tuple[str, str]


def _terms(
    rules: PodAffinityRules | None, namespace: str, labels: Labels
) -> tuple[list[AffinityTerm], list[tuple[AffinityTerm, int]]]:
    if rules is None:
        return [], []
    required = [affinity_term(t, namespace, labels) for t in rules.required_during_scheduling_ignored_during_execution]
    preferred = [
        (affinity_term(w.pod_affinity_term, namespace, labels), w.weight)
        for w in rules.preferred_during_scheduling_ignored_during_execution
    ]
    return required, preferred


class InterPodAffinity:
    """One pod's InterPodAffinity: its PreFilter counts, made once per decision, then asked per node."""

    def __init__(self, request: PodRequest, pods: PodTopologyIndex) -> None:
        self.pods = pods
        self.namespace, self.labels = request.namespace, request.labels
        self.namespace_labels = pods.namespace_labels.get(request.namespace, {})
        affinities = request.affinities
        self.required_affinity, self.preferred_affinity = _terms(
            affinities.pod_affinity if affinities else None, request.namespace, request.labels
        )
        self.required_anti, self.preferred_anti = _terms(
            affinities.pod_anti_affinity if affinities else None, request.namespace, request.labels
        )
        self.affinity_counts = self._affinity_counts()
        self.anti_counts = self._anti_counts()
        self.existing_anti_counts = self._existing_anti_counts()
        self.filters = bool(self.required_affinity or self.anti_counts or self.existing_anti_counts)
        self.matches_own_terms = bool(self.required_affinity) and all(
            t.matches(self.namespace, self.labels, self.namespace_labels) for t in self.required_affinity
        )

    # --- PreFilter -------------------------------------------------------------------------

    def _group_matches(self, term: AffinityTerm, group: LabelGroup) -> bool:
        return term.matches(group.namespace, group.labels, self.pods.namespace_labels.get(group.namespace, {}))

    def _add(self, counts: dict[TopologyPair, int], key: str, nodes: Mapping[str, int], weight: int = 1) -> None:
        for node, count in nodes.items():
            value = self.pods.labels_of(node).get(key)
            if value is not None:
                counts[(key, value)] = counts.get((key, value), 0) + weight * count

    def _affinity_counts(self) -> dict[TopologyPair, int]:
        counts: dict[TopologyPair, int] = {}
        terms = self.required_affinity
        if not terms:
            return counts
        for group in self.pods.groups(terms[0].selector):
            if all(self._group_matches(term, group) for term in terms):
                for term in terms:
                    self._add(counts, term.topology_key, group.nodes)
        return counts

    def _anti_counts(self) -> dict[TopologyPair, int]:
        counts: dict[TopologyPair, int] = {}
        for term in self.required_anti:
            for group in self.pods.groups(term.selector):
                if self._group_matches(term, group):
                    self._add(counts, term.topology_key, group.nodes)
        return counts

    def _existing_anti_counts(self) -> dict[TopologyPair, int]:
        counts: dict[TopologyPair, int] = {}
        for (term, _), nodes in self.pods.terms(TermKind.REQUIRED_ANTI_AFFINITY).items():
            if term.matches(self.namespace, self.labels, self.namespace_labels):
                self._add(counts, term.topology_key, nodes)
        return counts

    # --- Filter ----------------------------------------------------------------------------

    def failure(self, labels: Labels) -> str | None:
        """kube-scheduler's reason the node's labels (its domains) refuse the pod, or None."""
        if self.required_affinity and not self._satisfies_affinity(labels):
            return AFFINITY_REASON
        if self.anti_counts:
            for term in self.required_anti:
                value = labels.get(term.topology_key)
                if value is not None and self.anti_counts.get((term.topology_key, value), 0) > 0:
                    return ANTI_AFFINITY_REASON
        for (key, value), count in self.existing_anti_counts.items():
            if count > 0 and labels.get(key) == value:
                return EXISTING_ANTI_AFFINITY_REASON
        return None

    def _satisfies_affinity(self, labels: Labels) -> bool:
        pods_exist = True
        for term in self.required_affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return False  # every term's topology key must be on the node
            if self.affinity_counts.get((term.topology_key, value), 0) <= 0:
                pods_exist = False
        # The first pod of a group affine to itself: no pod counts anywhere, and it matches its own terms.
        return pods_exist or (not self.affinity_counts and self.matches_own_terms)

    # --- Score -----------------------------------------------------------------------------

    def topology_scores(self) -> dict[str, dict[str, int]]:
        """PreScore: the score of each topology key's values (empty: the plugin does not score this pod)."""
        if not (self.preferred_affinity or self.preferred_anti or self.pods.has_pods_with_affinity):
            return {}
        pairs: dict[TopologyPair, int] = {}
        for terms, sign in ((self.preferred_affinity, 1), (self.preferred_anti, -1)):
            for term, weight in terms:
                for group in self.pods.groups(term.selector):
                    if self._group_matches(term, group):
                        self._add(pairs, term.topology_key, group.nodes, sign * weight)
        existing = (
            (TermKind.REQUIRED_AFFINITY, 1, HARD_POD_AFFINITY_WEIGHT),
            (TermKind.PREFERRED_AFFINITY, 1, 0),
            (TermKind.PREFERRED_ANTI_AFFINITY, -1, 0),
        )
        for kind, sign, fixed in existing:
            if kind is TermKind.REQUIRED_AFFINITY and fixed <= 0:
                continue
            for (term, weight), nodes in self.pods.terms(kind).items():
                if term.matches(self.namespace, self.labels, self.namespace_labels):
                    self._add(pairs, term.topology_key, nodes, sign * (fixed or weight))
        scores: dict[str, dict[str, int]] = {}
        for (key, value), score in pairs.items():
            scores.setdefault(key, {})[value] = score
        return scores


def raw_score(scores: Mapping[str, Mapping[str, int]], labels: Labels) -> int:
    """Score: the sums of the node's domains."""
    total = 0
    for key, values in scores.items():
        value = labels.get(key)
        if value is not None:
            total += values.get(value, 0)
    return total


def normalized(raw: Mapping[str, int], names: Iterable[str]) -> dict[str, int]:
    """NormalizeScore over the feasible nodes: 100 * (raw - min) / (max - min), truncated (0 when all equal)."""
    names = list(names)
    if not names:
        return {}
    low, high = min(raw[n] for n in names), max(raw[n] for n in names)
    spread = high - low
    if spread <= 0:
        return dict.fromkeys(names, 0)
    return {n: affinity_score(raw[n], low, high) for n in names}


def affinity_score(raw: int, low: int, high: int) -> int:
    """NormalizeScore of one feasible node, `low` and `high` the feasible nodes' least and most raw scores."""
    spread = high - low
    return int(MAX_NODE_SCORE * ((raw - low) / spread)) if spread > 0 else 0
