"""Topology spread constraints, as kube-scheduler's PodTopologySpread plugin filters and scores.

Filter (podtopologyspread/filtering.go), the pod's DoNotSchedule constraints, per node:

    "node(s) didn't match pod topology spread constraints (missing required label)"
        the node lacks a constraint's topology key.
    "node(s) didn't match pod topology spread constraints"
        matching pods in the node's domain + 1 (when the pod matches its own selector) - the global
        minimum > maxSkew. Pods are counted in the pod's namespace, on *eligible* nodes: nodes with every
        constraint's key that pass the constraint's nodeAffinityPolicy (Honor: the pod's nodeSelector and
        required node affinity) and nodeTaintsPolicy (Honor: no untolerated NoSchedule/NoExecute taint).
        The global minimum is over the eligible domains (0 when fewer than minDomains).

Score (scoring.go), the ScheduleAnyway constraints (or, for a pod with no constraints at all whose
Services / ReplicaSets / StatefulSets / ReplicationControllers select it, the cluster defaults:
hostname maxSkew 3 and zone maxSkew 5): per node, sum over constraints of
count * log(domains + 2) + (maxSkew - 1), rounded, then 100 * (max + min - score) / max over the
feasible nodes (fewer matching pods, higher score); feasible nodes lacking a key score 0 (with the
cluster defaults a missing key only drops that constraint).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from engine.cluster.pods import PodTopologyIndex
from engine.core.labels import Labels, Selector, selector_of
from engine.core.model import PodRequest
from schemas.kube import DO_NOT_SCHEDULE, HONOR, LabelSelector, TopologySpreadConstraint

POD_TOPOLOGY_SPREAD = "PodTopologySpread"
SPREAD_REASON = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_REASON = f"{SPREAD_REASON} (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SYSTEM_DEFAULTS = ((HOSTNAME, 3), (ZONE, 5))  # kube-scheduler's List defaulting: ScheduleAnyway
MAX_NODE_SCORE = 100
NO_DOMAIN_MINIMUM = 2**31 - 1  # kube's critical path when no domain is eligible: every skew passes

# (constraint, node name) -> the node passes the constraint's nodeAffinityPolicy and nodeTaintsPolicy
InclusionPolicies = Callable[["Constraint", str], bool]


class Constraint:
    """One constraint, compiled: its selector merged with matchLabelKeys from the pod's labels."""

    __slots__ = ("honor_affinity", "honor_taints", "key", "max_skew", "min_domains", "selector", "self_match")

    def __init__(self, constraint: TopologySpreadConstraint, labels: Labels) -> None:
        self.key = constraint.topology_key
        self.max_skew = constraint.max_skew
        self.min_domains = constraint.min_domains
        self.honor_affinity = constraint.node_affinity_policy == HONOR
        self.honor_taints = constraint.node_taints_policy == HONOR
        self.selector: Selector = selector_of(constraint.label_selector, labels, constraint.match_label_keys)
        self.self_match = self.selector.matches(labels)


def default_constraints(selector: LabelSelector | None, labels: Labels) -> list[Constraint]:
    """The cluster-default constraints over the pod's owners' selector (none when it selects everything)."""
    if selector is None or (not selector.match_labels and not selector.match_expressions):
        return []
    return [
        Constraint(
            TopologySpreadConstraint(
                max_skew=skew, topology_key=key, when_unsatisfiable="ScheduleAnyway", label_selector=selector
            ),
            labels,
        )
        for key, skew in SYSTEM_DEFAULTS
    ]


class PodTopologySpread:
    """One pod's constraints; the filter's counts are made once per decision, the score's on `scores`."""

    def __init__(self, request: PodRequest, pods: PodTopologyIndex, eligible: InclusionPolicies) -> None:
        self.pods = pods
        self.namespace = request.namespace
        own = request.topology_spread_constraints
        self.hard = [Constraint(c, request.labels) for c in own if c.when_unsatisfiable == DO_NOT_SCHEDULE]
        self.soft = [Constraint(c, request.labels) for c in own if c.when_unsatisfiable != DO_NOT_SCHEDULE]
        self.system_defaulted = not own
        if not own:
            self.soft = default_constraints(request.default_spread_selector, request.labels)
        self._policy = eligible
        self._eligible: dict[tuple[int, str], bool] = {}
        self.counts = [self._counts(i, c) for i, c in enumerate(self.hard)]
        self.minimum = [self._minimum(i, c) for i, c in enumerate(self.hard)]

    # --- Filter ----------------------------------------------------------------------------

    def _eligible_node(self, i: int, node: str) -> bool:
        """A node counted for hard constraint i: every hard key, and the constraint's inclusion policies."""
        found = self._eligible.get((i, node))
        if found is None:
            labels = self.pods.labels_of(node)
            found = all(c.key in labels for c in self.hard) and self._policy(self.hard[i], node)
            self._eligible[(i, node)] = found
        return found

    def matching(self, constraint: Constraint) -> Iterable[tuple[str, int]]:
        """(node, matching pods there) for the pods of the pod's namespace the constraint selects (not those
        being deleted)."""
        for group in self.pods.groups(constraint.selector):
            if group.terminating or group.namespace != self.namespace:
                continue
            if constraint.selector.matches(group.labels):
                yield from group.nodes.items()

    def _counts(self, i: int, constraint: Constraint) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node, count in self.matching(constraint):
            if self._eligible_node(i, node):
                value = self.pods.labels_of(node)[constraint.key]
                counts[value] = counts.get(value, 0) + count
        return counts

    def _minimum(self, i: int, constraint: Constraint) -> int:
        counted = self.counts[i]
        empty_domain = False
        domains = 0
        for value, nodes in self.pods.domains(constraint.key).items():
            if value in counted:
                domains += 1
            elif any(self._eligible_node(i, node) for node in nodes):
                domains += 1
                empty_domain = True
                if constraint.min_domains is None:
                    break  # the minimum is 0: nothing more to learn
        if constraint.min_domains is not None and domains < constraint.min_domains:
            return 0
        if empty_domain:
            return 0
        return min(counted.values()) if counted else NO_DOMAIN_MINIMUM

    def failure(self, labels: Labels) -> str | None:
        for i, constraint in enumerate(self.hard):
            value = labels.get(constraint.key)
            if value is None:
                return MISSING_LABEL_REASON
            skew = self.counts[i].get(value, 0) + constraint.self_match - self.minimum[i]
            if skew > constraint.max_skew:
                return SPREAD_REASON
        return None

    # --- Score -----------------------------------------------------------------------------

    def scores(self, feasible: Iterable[str]) -> dict[str, int]:
        """PreScore, Score and NormalizeScore over the feasible nodes (empty: the plugin does not score)."""
        if not self.soft:
            return {}
        labels_of = self.pods.labels_of
        keys = [c.key for c in self.soft]
        names = list(feasible)
        scored: list[tuple[str, Labels]] = []  # feasible nodes not ignored, with their labels
        domains: list[dict[str, int]] = [{} for _ in self.soft]  # the non-hostname constraints' domains
        for name in names:
            labels = labels_of(name)
            if self.require_all and not all(k in labels for k in keys):
                continue  # IgnoredNodes: scored 0
            scored.append((name, labels))
            for i, key in enumerate(keys):
                if key != HOSTNAME:
                    domains[i].setdefault(labels.get(key, ""), 0)
        score = SpreadScore(self, len(scored), domains)
        return normalized_spread({name: score.raw(name, labels) for name, labels in scored}, names)

    @property
    def require_all(self) -> bool:
        """A node lacking a constraint's key is ignored (scored 0), but with the cluster defaults."""
        return not self.system_defaulted

    def count_domains(self, domains: list[dict[str, int]]) -> list[dict[str, int]]:
        """Adds the matching pods of every node (eligible for the constraint) to its domain's count, for the
        domains of feasible nodes; returns each node's own count for the hostname constraints."""
        own: list[dict[str, int]] = [{} for _ in self.soft]
        keys = [c.key for c in self.soft]
        require_all = self.require_all
        for i, c in enumerate(self.soft):
            for node, count in self.matching(c):
                labels = self.pods.labels_of(node)
                if c.key == HOSTNAME:
                    own[i][node] = own[i].get(node, 0) + count
                elif (not require_all or all(k in labels for k in keys)) and self._policy(c, node):
                    domain = labels.get(c.key, "")
                    if domain in domains[i]:
                        domains[i][domain] += count
        return own


class SpreadScore:
    """PreScore's outcome: each constraint's share of a node's raw score, from how many nodes are scored
    and which domains (of the non-hostname constraints) hold one."""

    def __init__(self, spread: PodTopologySpread, scored: int, domains: list[dict[str, int]]) -> None:
        """`domains`: per constraint, the scored nodes' values of its key (each 0; counted here)."""
        self.soft = spread.soft
        self.own = spread.count_domains(domains)  # the hostname constraints' count per node
        # Each domain's share of a node's score: count * log(domains + 2) + maxSkew - 1.
        self.shares: list[dict[str, float]] = []
        for i, c in enumerate(self.soft):
            weight = math.log((scored if c.key == HOSTNAME else len(domains[i])) + 2)
            if c.key == HOSTNAME:
                self.shares.append({name: count * weight for name, count in self.own[i].items()})
            else:
                self.shares.append({value: count * weight + (c.max_skew - 1) for value, count in domains[i].items()})

    def raw(self, name: str, labels: Labels) -> int:
        total = 0.0
        for i, c in enumerate(self.soft):
            value = labels.get(c.key)
            if value is not None:
                if c.key == HOSTNAME:
                    total += self.shares[i].get(name, 0.0) + (c.max_skew - 1)
                else:
                    total += self.shares[i][value]
        return math.floor(total + 0.5)  # Go's math.Round (totals are not negative)


def normalized_spread(raw: Mapping[str, int], feasible: Iterable[str]) -> dict[str, int]:
    """Fewer matching pods, higher score: 100 * (max + min - score) / max; nodes not scored get 0."""
    if not raw:
        return dict.fromkeys(feasible, 0)
    low, high = min(raw.values()), max(raw.values())
    return {name: 0 if name not in raw else spread_score(raw[name], low, high) for name in feasible}


def spread_score(raw: int, low: int, high: int) -> int:
    """NormalizeScore of one scored node, `low` and `high` the scored nodes' least and most raw scores."""
    return MAX_NODE_SCORE if high == 0 else MAX_NODE_SCORE * (high + low - raw) // high
