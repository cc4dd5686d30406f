"""InterPodAffinity and PodTopologySpread the straightforward way: every node, every running pod, no index.

Written after kube-scheduler's plugins as they read (interpodaffinity/{filtering,scoring}.go,
podtopologyspread/{filtering,scoring}.go): the PreFilter / PreScore loops over all nodes and their
pods, then Filter, Score and NormalizeScore per node. The engine's indexed rules must give the same
reasons and the same scores (test_kube_pod_topology.py compares them on random clusters).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

from engine.core.labels import AffinityTerm, affinity_term, selector_of
from engine.core.model import NodeState, PlacedPod, PodRequest, Snapshot
from engine.decide.kube.affinity import NodeAffinityRules
from engine.decide.kube.taints import first_untolerated
from schemas.kube import DO_NOT_SCHEDULE, HONOR, LabelSelector, PodAffinityRules, TopologySpreadConstraint

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING = SPREAD + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _terms(rules: PodAffinityRules | None, ns: str, labels: dict[str, str]) -> list[AffinityTerm]:
    required = rules.required_during_scheduling_ignored_during_execution if rules else ()
    return [affinity_term(t, ns, labels) for t in required]


def _weighted(rules: PodAffinityRules | None, ns: str, labels: dict[str, str]) -> list[tuple[AffinityTerm, int]]:
    preferred = rules.preferred_during_scheduling_ignored_during_execution if rules else ()
    return [(affinity_term(w.pod_affinity_term, ns, labels), w.weight) for w in preferred]


class Reference:
    def __init__(self, snapshot: Snapshot, pod: PodRequest) -> None:
        self.nodes = snapshot.nodes
        self.ns_labels = {n.name: n.labels for n in snapshot.namespaces}
        self.pod = pod
        aff = pod.affinities
        self.affinity = _terms(aff.pod_affinity if aff else None, pod.namespace, pod.labels)
        self.anti = _terms(aff.pod_anti_affinity if aff else None, pod.namespace, pod.labels)
        self.pref = _weighted(aff.pod_affinity if aff else None, pod.namespace, pod.labels)
        self.pref_anti = _weighted(aff.pod_anti_affinity if aff else None, pod.namespace, pod.labels)
        self.required_node = NodeAffinityRules(pod.node_selector, pod.affinity)

    def _matches(self, term: AffinityTerm, p: PlacedPod) -> bool:
        return term.matches(p.namespace, p.labels, self.ns_labels.get(p.namespace, {}))

    def _incoming_matches(self, term: AffinityTerm) -> bool:
        pod = self.pod
        return term.matches(pod.namespace, pod.labels, self.ns_labels.get(pod.namespace, {}))

    # --- InterPodAffinity ---------------------------------------------------------------------

    def interpod_failure(self, node: NodeState) -> str | None:
        affinity_counts: Counter[tuple[str, str]] = Counter()
        anti_counts: Counter[tuple[str, str]] = Counter()
        existing: Counter[tuple[str, str]] = Counter()
        for other in self.nodes:
            for p in other.running:
                if self.affinity and all(self._matches(t, p) for t in self.affinity):
                    for t in self.affinity:
                        if t.topology_key in other.labels:
                            affinity_counts[(t.topology_key, other.labels[t.topology_key])] += 1
                for t in self.anti:
                    if self._matches(t, p) and t.topology_key in other.labels:
                        anti_counts[(t.topology_key, other.labels[t.topology_key])] += 1
                aff = p.affinities
                for t in _terms(aff.pod_anti_affinity if aff else None, p.namespace, p.labels):
                    if self._incoming_matches(t) and t.topology_key in other.labels:
                        existing[(t.topology_key, other.labels[t.topology_key])] += 1
        labels = node.labels
        if self.affinity:
            exist = True
            for t in self.affinity:
                if t.topology_key not in labels:
                    return AFFINITY
                if affinity_counts[(t.topology_key, labels[t.topology_key])] <= 0:
                    exist = False
            own = all(self._incoming_matches(t) for t in self.affinity)
            if not exist and not (not affinity_counts and own):
                return AFFINITY
        for t in self.anti:
            if t.topology_key in labels and anti_counts[(t.topology_key, labels[t.topology_key])] > 0:
                return ANTI
        if any(existing[(k, v)] > 0 for k, v in labels.items()):
            return EXISTING
        return None

    def interpod_raw(self) -> dict[tuple[str, str], int]:
        scores: dict[tuple[str, str], int] = {}
        for other in self.nodes:
            for p in other.running:
                aff = p.affinities
                found = [(t, w) for t, w in self.pref if self._matches(t, p)]
                found += [(t, -w) for t, w in self.pref_anti if self._matches(t, p)]
                theirs = [(t, 1) for t in _terms(aff.pod_affinity if aff else None, p.namespace, p.labels)]
                theirs += _weighted(aff.pod_affinity if aff else None, p.namespace, p.labels)
                theirs += [(t, -w) for t, w in _weighted(aff.pod_anti_affinity if aff else None, p.namespace, p.labels)]
                found += [(t, w) for t, w in theirs if self._incoming_matches(t)]
                for t, w in found:
                    if t.topology_key in other.labels:
                        pair = (t.topology_key, other.labels[t.topology_key])
                        scores[pair] = scores.get(pair, 0) + w
        return scores

    def interpod_scores(self, feasible: Sequence[NodeState]) -> dict[str, int]:
        pairs = self.interpod_raw()
        raw = {n.name: sum(v for (k, val), v in pairs.items() if n.labels.get(k) == val) for n in feasible}
        if not raw:
            return {}
        low, high = min(raw.values()), max(raw.values())
        return {n: int(100 * ((s - low) / (high - low))) if high > low else 0 for n, s in raw.items()}

    # --- PodTopologySpread --------------------------------------------------------------------

    def _included(self, c: TopologySpreadConstraint, node: NodeState) -> bool:
        if c.node_affinity_policy == HONOR and not self.required_node.required_matches(node.name, node.labels):
            return False
        return not (c.node_taints_policy == HONOR and first_untolerated(node.taints, self.pod.tolerations))

    def _count(self, c: TopologySpreadConstraint, node: NodeState) -> int:
        selector = selector_of(c.label_selector, self.pod.labels, c.match_label_keys)
        return sum(
            1
            for p in node.running
            if p.namespace == self.pod.namespace and not p.terminating and selector.matches(p.labels)
        )

    def spread_failure(self, node: NodeState) -> str | None:
        hard = [c for c in self.pod.topology_spread_constraints if c.when_unsatisfiable == DO_NOT_SCHEDULE]
        for c in hard:
            counts: dict[str, int] = {}
            for other in self.nodes:
                if all(h.topology_key in other.labels for h in hard) and self._included(c, other):
                    value = other.labels[c.topology_key]
                    counts[value] = counts.get(value, 0) + self._count(c, other)
            if c.topology_key not in node.labels:
                return MISSING
            minimum = min(counts.values()) if counts else 2**31 - 1
            if c.min_domains is not None and len(counts) < c.min_domains:
                minimum = 0
            own = selector_of(c.label_selector, self.pod.labels, c.match_label_keys).matches(self.pod.labels)
            if counts.get(node.labels[c.topology_key], 0) + own - minimum > c.max_skew:
                return SPREAD
        return None

    def _soft(self) -> tuple[list[TopologySpreadConstraint], bool]:
        own = self.pod.topology_spread_constraints
        if own:
            return [c for c in own if c.when_unsatisfiable != DO_NOT_SCHEDULE], True
        selector = self.pod.default_spread_selector
        if selector is None or selector == LabelSelector():
            return [], False
        return [
            TopologySpreadConstraint(
                max_skew=skew, topology_key=key, when_unsatisfiable="ScheduleAnyway", label_selector=selector
            )
            for key, skew in ((HOSTNAME, 3), (ZONE, 5))
        ], False

    def spread_scores(self, feasible: Sequence[NodeState]) -> dict[str, int]:
        soft, require_all = self._soft()
        if not soft:
            return {}

        def has_all(n: NodeState) -> bool:
            return all(c.topology_key in n.labels for c in soft)

        ignored = {n.name for n in feasible if require_all and not has_all(n)}
        kept = [n for n in feasible if n.name not in ignored]
        raw: dict[str, int] = {}
        for node in kept:
            total = 0.0
            for c in soft:
                key = c.topology_key
                if key not in node.labels:
                    continue
                if key == HOSTNAME:
                    size, count = len(kept), self._count(c, node)
                else:
                    domains = {n.labels.get(key, "") for n in kept}
                    size = len(domains)
                    count = sum(
                        self._count(c, n)
                        for n in self.nodes
                        if n.labels.get(key, "") == node.labels[key]
                        and (not require_all or has_all(n))
                        and self._included(c, n)
                    )
                total += count * math.log(size + 2) + (c.max_skew - 1)
            raw[node.name] = math.floor(total + 0.5)
        low, high = min(raw.values(), default=0), max(raw.values(), default=0)
        out = dict.fromkeys((n.name for n in feasible), 0)
        for name, score in raw.items():
            out[name] = 100 if high == 0 else 100 * (high + low - score) // high
        return out

    # --- both ---------------------------------------------------------------------------------

    def failure(self, node: NodeState) -> str | None:
        return self.spread_failure(node) or self.interpod_failure(node)

    def points(self, passes_other_filters: Callable[[NodeState], bool]) -> dict[str, int]:
        """Each feasible node's 2 * InterPodAffinity + 2 * PodTopologySpread (nodes failing a filter: absent)."""
        feasible = [n for n in self.nodes if passes_other_filters(n) and self.failure(n) is None]
        affinity, spread = self.interpod_scores(feasible), self.spread_scores(feasible)
        return {n.name: 2 * affinity.get(n.name, 0) + 2 * spread.get(n.name, 0) for n in feasible}
