"""Label selectors and pod affinity terms, compiled once into hashable values and matched as Kubernetes does.

Sources: k8s.io/apimachinery metav1.LabelSelectorAsSelector (a missing selector
selects nothing, an empty one everything; matchLabels are `key = value`;
NotIn and DoesNotExist match a pod without the label) and kube-scheduler's
framework.AffinityTerm (a term's namespaces: those it names, plus those its
namespaceSelector matches; none of either means the owner pod's own).
`matchLabelKeys` / `mismatchLabelKeys` are merged into the selector from the
owner pod's labels (`key In (value)` / `key NotIn (value)`, keys the pod lacks
are skipped), as the API server does when it admits the pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from schemas.kube import EXISTS, IN, NOT_IN, LabelSelector, PodAffinityTerm

Labels = Mapping[str, str]
Requirement = tuple[str, str, frozenset[str]]  # key, operator, values


class Selector(NamedTuple):
    """A compiled label selector: every requirement must hold; `nothing` selects no labels at all."""

    requirements: tuple[Requirement, ...]
    nothing: bool = False

    def matches(self, labels: Labels) -> bool:
        if self.nothing:
            return False
        for key, op, values in self.requirements:
            value = labels.get(key)
            if op == IN:
                if value is None or value not in values:
                    return False
            elif op == NOT_IN:
                if value is not None and value in values:
                    return False
            elif op == EXISTS:
                if value is None:
                    return False
            elif value is not None:  # DoesNotExist
                return False
        return True

    def wanted_labels(self) -> tuple[str, frozenset[str]] | None:
        """A key and the values a matching pod must have for it (the narrowest In), or None."""
        ins = [(key, values) for key, op, values in self.requirements if op == IN]
        return min(ins, key=lambda kv: len(kv[1])) if ins else None


def selector_of(
    selector: LabelSelector | None,
    owner_labels: Labels = {},  # noqa: B006 - read only
    match_keys: Iterable[str] = (),
    mismatch_keys: Iterable[str] = (),
) -> Selector:
    """The compiled selector, with `key In/NotIn (owner's value)` merged for the keys the owner has."""
    if selector is None:
        return Selector((), nothing=True)
    requirements: list[Requirement] = [(k, IN, frozenset((v,))) for k, v in selector.match_labels.items()]
    requirements += [(r.key, r.operator, frozenset(r.values)) for r in selector.match_expressions]
    requirements += [(k, IN, frozenset((owner_labels[k],))) for k in match_keys if k in owner_labels]
    requirements += [(k, NOT_IN, frozenset((owner_labels[k],))) for k in mismatch_keys if k in owner_labels]
    return Selector(tuple(sorted(set(requirements), key=lambda r: (r[0], r[1], sorted(r[2])))))


class AffinityTerm(NamedTuple):
    """One pod affinity term of one owner pod, compiled (hashable: equal terms of many pods are counted once)."""

    namespaces: frozenset[str]
    namespace_selector: Selector  # NOTHING when the term has none
    selector: Selector
    topology_key: str

    def matches(self, namespace: str, labels: Labels, namespace_labels: Labels) -> bool:
        """Does a pod in `namespace` (whose labels are `namespace_labels`) with `labels` match the term?"""
        if namespace in self.namespaces or self.namespace_selector.matches(namespace_labels):
            return self.selector.matches(labels)
        return False


def affinity_term(term: PodAffinityTerm, owner_namespace: str, owner_labels: Labels) -> AffinityTerm:
    namespaces = frozenset(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces = frozenset((owner_namespace,))
    return AffinityTerm(
        namespaces=namespaces,
        namespace_selector=selector_of(term.namespace_selector),
        selector=selector_of(term.label_selector, owner_labels, term.match_label_keys, term.mismatch_label_keys),
        topology_key=term.topology_key,
    )


__all__ = ["AffinityTerm", "Selector", "affinity_term", "selector_of"]
