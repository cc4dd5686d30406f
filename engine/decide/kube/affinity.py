"""nodeSelector and node affinity, matched as kube-scheduler's NodeAffinity plugin does.

Sources: k8s.io/component-helpers scheduling/corev1/nodeaffinity (terms ORed,
an empty term or an empty term list selects nothing, matchFields read only the
node's name), k8s.io/apimachinery labels.Requirement.Matches (NotIn and
DoesNotExist match a node without the label; Gt/Lt compare integers and a label
that is not one does not match), and the plugin's PreFilter (a pod whose every
required term names nodes by metadata.name In is only checked on those nodes).

A `NodeAffinityRules` is built once per pod; matching a node then allocates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from schemas.kube import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    IN,
    LT,
    NODE_NAME_FIELD,
    NOT_IN,
    Affinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    parse_int64,
)

Labels = Mapping[str, str]

CONFLICT_REASON = "pod affinity terms conflict"  # PreFilter: the terms' node names exclude every node


class _Requirement:
    __slots__ = ("bound", "key", "op", "values")

    def __init__(self, requirement: NodeSelectorRequirement) -> None:
        self.key = requirement.key
        self.op = requirement.operator
        self.values = frozenset(requirement.values)
        self.bound = parse_int64(requirement.values[0]) if self.op in (GT, LT) else None

    def matches(self, labels: Labels) -> bool:
        value = labels.get(self.key)
        op = self.op
        if op == IN:
            return value is not None and value in self.values
        if op == NOT_IN:
            return value is None or value not in self.values
        if op == EXISTS:
            return value is not None
        if op == DOES_NOT_EXIST:
            return value is None
        number = None if value is None else parse_int64(value)
        if number is None or self.bound is None:
            return False
        return number > self.bound if op == GT else number < self.bound


class _Term:
    __slots__ = ("expressions", "names")

    def __init__(self, term: NodeSelectorTerm) -> None:
        self.expressions = tuple(_Requirement(r) for r in term.match_expressions)
        # matchFields: (node name, wanted) pairs; In wants the name, NotIn does not
        self.names = tuple((r.values[0], r.operator == IN) for r in term.match_fields)

    def matches(self, node_name: str, labels: Labels) -> bool:
        for requirement in self.expressions:
            if not requirement.matches(labels):
                return False
        if node_name:  # kube ignores matchFields for a node without a name
            for name, wanted in self.names:
                if (name == node_name) != wanted:
                    return False
        return True


class NodeAffinityRules:
    """A pod's nodeSelector and node affinity, compiled once and matched against many nodes."""

    __slots__ = ("candidate_names", "conflict", "preferred", "required", "selector")

    def __init__(self, node_selector: Mapping[str, str], affinity: Affinity | None) -> None:
        self.selector = tuple(node_selector.items())
        node_affinity = affinity.node_affinity if affinity is not None else None
        required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
        # None = no required affinity; () = required terms that select no node
        terms = required.node_selector_terms if required is not None else ()
        self.required = None if required is None else tuple(_Term(t) for t in terms if not t.empty)
        preferred = node_affinity.preferred_during_scheduling_ignored_during_execution if node_affinity else ()
        self.preferred = tuple((_Term(p.preference), p.weight) for p in preferred if not p.preference.empty)
        self.candidate_names = _named_nodes(required.node_selector_terms) if required is not None else None
        self.conflict = self.candidate_names is not None and not self.candidate_names

    @property
    def has_required(self) -> bool:
        return bool(self.selector) or self.required is not None

    def required_matches(self, node_name: str, labels: Labels) -> bool:
        for key, wanted in self.selector:
            if labels.get(key) != wanted:
                return False
        if self.required is None:
            return True
        return any(term.matches(node_name, labels) for term in self.required)

    def preference_score(self, node_name: str, labels: Labels) -> int:
        return sum(weight for term, weight in self.preferred if term.matches(node_name, labels))


def _named_nodes(terms: tuple[NodeSelectorTerm, ...]) -> frozenset[str] | None:
    """The nodes NodeAffinity's PreFilter limits the pod to, or None for every node.

    A term narrows only through matchFields metadata.name In (ANDed within the
    term); one term without it leaves every node possible (terms are ORed).
    """
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for requirement in term.match_fields:
            if requirement.key == NODE_NAME_FIELD and requirement.operator == IN:
                values = set(requirement.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return frozenset(names)


def node_selector_matches(node_selector: Mapping[str, str], labels: Labels) -> bool:
    """Every key=value of the pod's nodeSelector is a label of the node."""
    return all(labels.get(key) == wanted for key, wanted in node_selector.items())


def required_affinity_matches(affinity: Affinity | None, node_name: str, labels: Labels) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution matches the node (True when the pod has none)."""
    return NodeAffinityRules({}, affinity).required_matches(node_name, labels)


def preferred_affinity_score(affinity: Affinity | None, node_name: str, labels: Labels) -> int:
    """The sum of the weights of the preferred terms that match the node."""
    return NodeAffinityRules({}, affinity).preference_score(node_name, labels)


def node_name_candidates(affinity: Affinity | None) -> frozenset[str] | None:
    """The node names the required affinity limits the pod to (kube's PreFilter), or None for all."""
    return NodeAffinityRules({}, affinity).candidate_names
