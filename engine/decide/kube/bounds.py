"""InterPodAffinity's and PodTopologySpread's normalisation, from domains instead of nodes.

Both plugins' raw score of a node depends on its domains only: per topology key, the value it has.
Nodes with no matching pod of their own (the hostname constraints and terms) share the score of
their domain of the one other key, so the feasible nodes fall into few *raw classes*: one per value of
that key (or one), plus each node that has its own count. The lowest and highest raw score over the
feasible nodes, how many there are and which domains hold one are then read from the base feasible
set's counts per domain (engine/decide/kube/feasible.py), less the nodes the two plugins' filters
refuse (blocked domains, read from the same counts the filters use): no node is asked.

Where the rules have a shape this does not cover (required pod affinity; more than one non-hostname
key blocked or scored; nodes lacking a key the rules read), `fast_points` answers None and the
decision asks every node, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from engine.cluster.pods import PodTopologyIndex
from engine.decide.kube.feasible import BaseFeasible
from engine.decide.kube.interpod import InterPodAffinity, affinity_score, raw_score
from engine.decide.kube.spread import HOSTNAME, PodTopologySpread, SpreadScore, spread_score


class Feasible:
    """The feasible nodes: the base set less the domains and nodes the pod-topology filters refuse."""

    def __init__(self, base: BaseFeasible, pods: PodTopologyIndex, blocked: dict[str, set[str]]) -> None:
        self.base, self.pods = base, pods
        self.hosts = blocked.pop(HOSTNAME, set())
        self.key, self.values = next(iter(blocked.items())) if blocked else ("", set())
        self.extra = [h for h in self.hosts if h in base and not self._in_blocked_domain(h)]
        blocked_out = sum(base.by_domain(self.key).get(v, 0) for v in self.values) if self.values else 0
        self.count = len(base) - blocked_out - len(self.extra)

    def _in_blocked_domain(self, name: str) -> bool:
        return bool(self.values) and self.pods.labels_of(name).get(self.key) in self.values

    def __contains__(self, name: str) -> bool:
        return name in self.base and name not in self.hosts and not self._in_blocked_domain(name)

    def by_domain(self, key: str) -> dict[str, int] | None:
        """Feasible nodes per value of `key` (None: a blocked key other than `key` would need joint counts)."""
        if self.values and key != self.key:
            return None
        counts = {v: c for v, c in self.base.by_domain(key).items() if v not in self.values}
        for name in self.extra:
            value = self.pods.labels_of(name)[key]
            counts[value] -= 1
        return {v: c for v, c in counts.items() if c > 0}


def blocked_domains(spread: PodTopologySpread | None, inter_pod: InterPodAffinity) -> dict[str, set[str]] | None:
    """The domains the two filters refuse, by key (None: a shape `Feasible` does not cover)."""
    blocked: dict[str, set[str]] = {}
    pods = inter_pod.pods
    if spread is not None and spread.hard:
        for i, c in enumerate(spread.hard):
            room = c.max_skew + spread.minimum[i] - int(c.self_match)
            if room < 0 or not pods.every_node_has(c.key):
                return None  # every domain without matching pods refused too; or nodes missing the key
            for value, count in spread.counts[i].items():
                if count > room:
                    blocked.setdefault(c.key, set()).add(value)
    if inter_pod.filters:
        if inter_pod.required_affinity:
            return None
        for counts in (inter_pod.anti_counts, inter_pod.existing_anti_counts):
            for (key, value), count in counts.items():
                if count > 0:
                    blocked.setdefault(key, set()).add(value)
    if len([k for k in blocked if k != HOSTNAME]) > 1:
        return None
    return blocked


def _classes(
    feasible: Feasible, key: str | None, own: set[str], pods: PodTopologyIndex
) -> list[tuple[str, dict[str, str]]] | None:
    """One representative (name, labels) per raw class: each feasible node with its own count, and per
    value of `key` (or once) the nodes without one, where a feasible such node exists."""
    labels_of = pods.labels_of
    mine = [n for n in own if n in feasible]
    out = [(n, dict(labels_of(n))) for n in mine]
    if key is None:
        if feasible.count - len(mine) > 0:
            out.append(("", {HOSTNAME: ""}))
        return out
    counts = feasible.by_domain(key)
    if counts is None:
        return None
    for name in mine:
        value = labels_of(name)[key]
        if value in counts:
            counts[value] -= 1
    out.extend(("", {key: value, HOSTNAME: ""}) for value, count in counts.items() if count > 0)
    return out


def _other_key(keys: list[str], pods: PodTopologyIndex) -> tuple[bool, str | None]:
    """(covered, the one non-hostname key): every node carries every key, and at most one is not the hostname."""
    if not all(pods.every_node_has(k) for k in keys):
        return False, None
    others = {k for k in keys if k != HOSTNAME}
    if len(others) > 1:
        return False, None
    return True, next(iter(others), None)


class PluginPoints(NamedTuple):
    """One plugin's normalised score of each feasible node, the highest, the nodes with their own count
    (matching pods of their own under a hostname term or constraint), and the score of a feasible node
    without one from its domain labels (None: they lack the key the score reads beside the hostname)."""

    of_node: Callable[[str], int]
    highest: int
    own: frozenset[str]
    of_domain: Callable[[Mapping[str, str]], int | None]


def spread_points(spread: PodTopologySpread, feasible: Feasible) -> PluginPoints | None:
    """Each feasible node's PodTopologySpread score, and the highest (None: a shape not covered)."""
    pods = spread.pods
    covered, key = _other_key([c.key for c in spread.soft], pods)
    if not covered:
        return None
    values = feasible.by_domain(key) if key is not None else {}
    if values is None:
        return None
    domains = [{v: 0 for v in values} if c.key != HOSTNAME else {} for c in spread.soft]
    score = SpreadScore(spread, feasible.count, domains)
    own = {n for counts in score.own for n in counts}
    classes = _classes(feasible, key, own, pods)
    if classes is None:
        return None
    raws = [score.raw(name, labels) for name, labels in classes]
    low, high = min(raws, default=0), max(raws, default=0)
    labels_of = pods.labels_of

    def of_domain(labels: Mapping[str, str]) -> int | None:
        if key is None:
            return spread_score(score.raw("", {HOSTNAME: ""}), low, high)
        value = labels.get(key)
        if value is None or value not in values:
            return None  # no feasible node there, or a key the class does not carry: no bound from it
        return spread_score(score.raw("", {key: value, HOSTNAME: ""}), low, high)

    return PluginPoints(
        lambda name: spread_score(score.raw(name, labels_of(name)), low, high),
        spread_score(low, low, high),
        frozenset(own),
        of_domain,
    )


def affinity_points(
    scores: Mapping[str, Mapping[str, int]], pods: PodTopologyIndex, feasible: Feasible
) -> PluginPoints | None:
    """Each feasible node's InterPodAffinity score, and the highest (None: a shape not covered)."""
    covered, key = _other_key(list(scores), pods)
    if not covered:
        return None
    own = set(scores.get(HOSTNAME, ()))
    classes = _classes(feasible, key, own, pods)
    if classes is None:
        return None
    raws = [raw_score(scores, labels) for _, labels in classes]
    low, high = min(raws, default=0), max(raws, default=0)
    labels_of = pods.labels_of

    def of_domain(labels: Mapping[str, str]) -> int | None:
        if key is None:
            return affinity_score(raw_score(scores, {HOSTNAME: ""}), low, high)
        value = labels.get(key)
        if value is None:
            return None
        return affinity_score(raw_score(scores, {key: value, HOSTNAME: ""}), low, high)

    hosts = pods.domains(HOSTNAME)  # the terms count hostname values: the nodes carrying them
    return PluginPoints(
        lambda name: affinity_score(raw_score(scores, labels_of(name)), low, high),
        affinity_score(high, low, high),
        frozenset(n for value in own for n in hosts.get(value, ())),
        of_domain,
    )
