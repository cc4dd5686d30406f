"""The pods running on the cluster's nodes, kept as InterPodAffinity and PodTopologySpread ask for them.

A decision must not read every running pod: the index keeps them grouped by
*label set* (namespace and labels: the replicas of one workload share one),
each group with its count per node, and an inverted index from `key=value` to
the groups that carry it. A selector with an `In` requirement (matchLabels are
one) reads only the groups it can match; counts per topology domain then come
from the nodes those groups are on. Running pods' own affinity terms are kept
the same way: each distinct compiled term (required affinity, required
anti-affinity, preferred affinity and anti-affinity with their weight), with
its count per node.

Everything changes one node at a time (`sync`, when a node's pods or labels
change; `drop`, when a node goes), in time proportional to that node's pods.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping

from engine.core.labels import AffinityTerm, Labels, Selector, affinity_term
from engine.core.model import Namespace, NodeState, PlacedPod
from schemas.kube import PodAffinityRules


class TermKind(enum.Enum):
    REQUIRED_AFFINITY = "required affinity"
    REQUIRED_ANTI_AFFINITY = "required anti-affinity"
    PREFERRED_AFFINITY = "preferred affinity"
    PREFERRED_ANTI_AFFINITY = "preferred anti-affinity"


DOMAIN_KEYS_BOUND = 64  # topology keys whose domains are kept
WeightedTerm = tuple[AffinityTerm, int]  # the term and its weight (0 for a required one)
GroupKey = tuple[str, tuple[tuple[str, str], ...], bool]  # namespace, sorted labels, terminating


def _count(counts: dict[str, int], node: str, change: int) -> None:
    total = counts.get(node, 0) + change
    if total:
        counts[node] = total
    else:
        del counts[node]


def pod_terms(pod: PlacedPod) -> Iterator[tuple[TermKind, WeightedTerm]]:
    """A running pod's affinity terms, compiled (matchLabelKeys merged from its own labels)."""
    if pod.affinities is None:
        return
    sides: tuple[tuple[PodAffinityRules | None, TermKind, TermKind], ...] = (
        (pod.affinities.pod_affinity, TermKind.REQUIRED_AFFINITY, TermKind.PREFERRED_AFFINITY),
        (pod.affinities.pod_anti_affinity, TermKind.REQUIRED_ANTI_AFFINITY, TermKind.PREFERRED_ANTI_AFFINITY),
    )
    for rules, required, preferred in sides:
        if rules is None:
            continue
        for term in rules.required_during_scheduling_ignored_during_execution:
            yield required, (affinity_term(term, pod.namespace, pod.labels), 0)
        for weighted in rules.preferred_during_scheduling_ignored_during_execution:
            compiled = affinity_term(weighted.pod_affinity_term, pod.namespace, pod.labels)
            yield preferred, (compiled, weighted.weight)


class LabelGroup:
    """Running pods of one namespace with one label set (and terminating or not): how many on each node."""

    __slots__ = ("labels", "namespace", "nodes", "terminating")

    def __init__(self, namespace: str, labels: Labels, terminating: bool) -> None:
        self.namespace = namespace
        self.labels = labels
        self.terminating = terminating
        self.nodes: dict[str, int] = {}


class PodTopologyIndex:
    """Running pods by label set and node, their affinity terms by node, and the namespaces' labels."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[PlacedPod, ...]] = {}
        self._node_labels: dict[str, Labels] = {}
        self._groups: dict[GroupKey, LabelGroup] = {}
        self._by_label: dict[tuple[str, str], set[GroupKey]] = {}
        self._terms: dict[TermKind, dict[WeightedTerm, dict[str, int]]] = {kind: {} for kind in TermKind}
        self._nodes_with_terms: dict[str, int] = {}  # node -> its pods with pod (anti-)affinity
        self.namespace_labels: dict[str, Labels] = {}
        self._domains: dict[str, dict[str, set[str]]] = {}  # topology key -> value -> nodes (keys asked for)
        self._labelled: dict[str, int] = {}  # topology key -> nodes that carry it (keys asked for)

    # --- changes ---------------------------------------------------------------------------

    def sync(self, node: NodeState) -> None:
        """The node's pods and labels now (an unchanged node costs two identity checks)."""
        before = self._running.get(node.name, ())
        self._relabel(node.name, node.labels)
        if before is node.running:
            return
        for pod in before:
            self._pod(node.name, pod, -1)
        for pod in node.running:
            self._pod(node.name, pod, 1)
        if node.running:
            self._running[node.name] = node.running
        else:
            self._running.pop(node.name, None)

    def drop(self, name: str) -> None:
        for pod in self._running.pop(name, ()):
            self._pod(name, pod, -1)
        self._relabel(name, None)

    def _relabel(self, name: str, labels: Labels | None) -> None:
        before = self._node_labels.get(name)
        if before is labels:
            return
        if labels is None:
            del self._node_labels[name]
        else:
            self._node_labels[name] = labels
        for key, domains in self._domains.items():
            old = before.get(key) if before is not None else None
            new = labels.get(key) if labels is not None else None
            if old == new:
                continue
            self._labelled[key] += (new is not None) - (old is not None)
            if old is not None:
                members = domains[old]
                members.discard(name)
                if not members:
                    del domains[old]
            if new is not None:
                domains.setdefault(new, set()).add(name)

    def set_namespaces(self, namespaces: tuple[Namespace, ...]) -> None:
        self.namespace_labels = {ns.name: ns.labels for ns in namespaces}

    def _pod(self, node: str, pod: PlacedPod, change: int) -> None:
        key: GroupKey = (pod.namespace, tuple(sorted(pod.labels.items())), pod.terminating)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = LabelGroup(pod.namespace, pod.labels, pod.terminating)
            for pair in key[1]:
                self._by_label.setdefault(pair, set()).add(key)
        _count(group.nodes, node, change)
        if not group.nodes:
            del self._groups[key]
            for pair in key[1]:
                keys = self._by_label[pair]
                keys.discard(key)
                if not keys:
                    del self._by_label[pair]
        if pod.affinities is None or pod.affinities.empty:
            return
        _count(self._nodes_with_terms, node, change)
        for kind, weighted in pod_terms(pod):
            counts = self._terms[kind].setdefault(weighted, {})
            _count(counts, node, change)
            if not counts:
                del self._terms[kind][weighted]

    # --- reading ---------------------------------------------------------------------------

    def labels_of(self, node: str) -> Labels:
        return self._node_labels.get(node, {})

    def groups(self, selector: Selector) -> Iterator[LabelGroup]:
        """The label groups `selector` may match (a superset: check `matches` on each)."""
        if selector.nothing:
            return
        wanted = selector.wanted_labels()
        if wanted is None:
            yield from list(self._groups.values())
            return
        key, values = wanted
        seen: set[GroupKey] = set()
        for value in sorted(values):
            for group_key in sorted(self._by_label.get((key, value), ())):
                if group_key not in seen:
                    seen.add(group_key)
                    yield self._groups[group_key]

    def domains(self, key: str) -> Mapping[str, set[str]]:
        """The nodes of each value of the topology key `key` (kept current once asked for)."""
        found = self._domains.get(key)
        if found is None:
            if len(self._domains) >= DOMAIN_KEYS_BOUND:
                self._domains.clear()
                self._labelled.clear()
            found = self._domains[key] = {}
            for node, labels in self._node_labels.items():
                value = labels.get(key)
                if value is not None:
                    found.setdefault(value, set()).add(node)
            self._labelled[key] = sum(len(nodes) for nodes in found.values())
        return found

    def every_node_has(self, key: str) -> bool:
        """Every node carries the label `key` (its domains are then kept current)."""
        self.domains(key)
        return self._labelled[key] == len(self._node_labels)

    def terms(self, kind: TermKind) -> Mapping[WeightedTerm, Mapping[str, int]]:
        """Running pods' distinct terms of `kind`, each with how many pods hold it on each node."""
        return self._terms[kind]

    @property
    def has_pods_with_affinity(self) -> bool:
        return bool(self._nodes_with_terms)

    def running(self, node: str) -> tuple[PlacedPod, ...]:
        return self._running.get(node, ())
