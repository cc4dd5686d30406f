"""nodeSelector and node affinity, from kube-scheduler's NodeAffinity tests (node_affinity_test.go)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from engine.decide.kube.affinity import (
    NodeAffinityRules,
    node_name_candidates,
    node_selector_matches,
    preferred_affinity_score,
    required_affinity_matches,
)
from schemas.kube import Affinity


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def field_in(name: str, operator: str = "In") -> dict[str, Any]:
    return {"key": "metadata.name", "operator": operator, "values": [name]}


def required(*terms: dict[str, Any]) -> Affinity:
    raw = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}
    return msgspec.convert(raw, Affinity)


def preferred(*weighted: tuple[int, dict[str, Any]]) -> Affinity:
    raw = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": term} for w, term in weighted
            ]
        }
    }
    return msgspec.convert(raw, Affinity)


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({}, {}, True),
        ({"foo": "bar"}, {}, False),  # missing labels
        ({"foo": "bar"}, {"foo": "bar"}, True),  # same labels
        ({"foo": "bar"}, {"foo": "bar", "baz": "blah"}, True),  # node labels are a superset
        ({"foo": "bar", "baz": "blah"}, {"foo": "bar"}, False),  # node labels are a subset
        ({"foo": "bar"}, {"foo": "baz"}, False),
    ],
)
def test_node_selector(selector: dict[str, str], labels: dict[str, str], matches: bool) -> None:
    assert node_selector_matches(selector, labels) is matches
    assert NodeAffinityRules(selector, None).required_matches("n", labels) is matches


@pytest.mark.parametrize(
    ("affinity", "labels", "matches"),
    [
        (None, {"foo": "bar"}, True),
        (Affinity(), {}, True),
        # In
        (required({"matchExpressions": [expr("foo", "In", "bar", "value2")]}), {"foo": "bar"}, True),
        (required({"matchExpressions": [expr("foo", "In", "bar")]}), {}, False),
        # Gt compares integers; a label that is not one does not match
        (required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]}), {"kernel-version": "0206"}, True),
        (required({"matchExpressions": [expr("kernel-version", "Gt", "204")]}), {"kernel-version": "204"}, False),
        (required({"matchExpressions": [expr("kernel-version", "Gt", "1")]}), {"kernel-version": "2.5"}, False),
        (required({"matchExpressions": [expr("kernel-version", "Gt", "1")]}), {}, False),
        (required({"matchExpressions": [expr("gpus", "Lt", "8")]}), {"gpus": "4"}, True),
        (required({"matchExpressions": [expr("gpus", "Lt", "8")]}), {"gpus": "8"}, False),
        (required({"matchExpressions": [expr("gpus", "Lt", "8")]}), {"gpus": "-1"}, True),
        # NotIn matches a node that lacks the label
        (required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}), {"mem-type": "DDR3"}, True),
        (required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}), {}, True),
        (required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}), {"mem-type": "DDR"}, False),
        # Exists / DoesNotExist
        (required({"matchExpressions": [expr("GPU", "Exists")]}), {"GPU": "NVIDIA-GRID-K1"}, True),
        (required({"matchExpressions": [expr("GPU", "Exists")]}), {"gpu": "x"}, False),
        (required({"matchExpressions": [expr("GPU", "DoesNotExist")]}), {}, True),
        (required({"matchExpressions": [expr("GPU", "DoesNotExist")]}), {"GPU": ""}, False),
        # expressions in a term are ANDed
        (
            required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]}),
            {"GPU": "AMD"},
            False,
        ),
        (
            required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]}),
            {"GPU": "NVIDIA"},
            True,
        ),
        # terms are ORed
        (
            required(
                {"matchExpressions": [expr("foo", "In", "bar")]}, {"matchExpressions": [expr("diffkey", "In", "w")]}
            ),
            {"diffkey": "w"},
            True,
        ),
        # an empty term list, or only empty terms, matches nothing
        (required(), {"foo": "bar"}, False),
        (required({}), {"foo": "bar"}, False),
        (required({"matchExpressions": []}), {"foo": "bar"}, False),
        (required({}, {"matchExpressions": [expr("foo", "Exists")]}), {"foo": "bar"}, True),
        # an affinity without a required part matches every node
        (preferred((5, {"matchExpressions": [expr("foo", "Exists")]})), {}, True),
    ],
)
def test_required_affinity(affinity: Affinity | None, labels: dict[str, str], matches: bool) -> None:
    assert required_affinity_matches(affinity, "node1", labels) is matches


@pytest.mark.parametrize(
    ("affinity", "node_name", "matches"),
    [
        (required({"matchFields": [field_in("node1")]}), "node1", True),
        (required({"matchFields": [field_in("node1")]}), "node2", False),
        (required({"matchFields": [field_in("node1", "NotIn")]}), "node2", True),
        (required({"matchFields": [field_in("node1", "NotIn")]}), "node1", False),
        # fields and expressions in one term are ANDed
        (required({"matchFields": [field_in("node1")], "matchExpressions": [expr("foo", "In", "bar")]}), "node1", True),
        (
            required({"matchFields": [field_in("node1")], "matchExpressions": [expr("foo", "In", "nope")]}),
            "node1",
            False,
        ),
        # ORed across terms
        (
            required({"matchFields": [field_in("node2")]}, {"matchExpressions": [expr("foo", "In", "bar")]}),
            "node1",
            True,
        ),
    ],
)
def test_match_fields_read_the_node_name(affinity: Affinity, node_name: str, matches: bool) -> None:
    assert required_affinity_matches(affinity, node_name, {"foo": "bar"}) is matches


def test_node_selector_and_affinity_must_both_match() -> None:
    rules = NodeAffinityRules({"zone": "a"}, required({"matchExpressions": [expr("gpu", "Exists")]}))
    assert rules.required_matches("n", {"zone": "a", "gpu": "1"})
    assert not rules.required_matches("n", {"zone": "b", "gpu": "1"})
    assert not rules.required_matches("n", {"zone": "a"})


@pytest.mark.parametrize(
    ("affinity", "candidates"),
    [
        (None, None),
        (required({"matchExpressions": [expr("foo", "Exists")]}), None),
        (required({"matchFields": [field_in("node1")]}), frozenset({"node1"})),
        (
            required({"matchFields": [field_in("node1")]}, {"matchFields": [field_in("node2")]}),
            frozenset({"node1", "node2"}),
        ),
        # one term without names leaves every node possible
        (required({"matchFields": [field_in("node1")]}, {"matchExpressions": [expr("foo", "Exists")]}), None),
        # ANDed names that cannot both hold: no node (kube: "pod affinity terms conflict")
        (required({"matchFields": [field_in("node1"), field_in("node2")]}), frozenset()),
        # NotIn does not narrow
        (required({"matchFields": [field_in("node1", "NotIn")]}), None),
        (required(), None),
    ],
)
def test_node_name_candidates_as_prefilter(affinity: Affinity | None, candidates: frozenset[str] | None) -> None:
    assert node_name_candidates(affinity) == candidates
    assert NodeAffinityRules({}, affinity).conflict is (candidates == frozenset())


def test_preferred_score_sums_the_weights_of_matching_terms() -> None:
    # kube's TestNodeAffinityPriority: weights 2, 4 and 5 over three label sets
    affinity = preferred(
        (2, {"matchExpressions": [expr("foo", "In", "bar")]}),
        (4, {"matchExpressions": [expr("key", "In", "value")]}),
        (5, {"matchExpressions": [expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1")]}),
    )
    assert preferred_affinity_score(affinity, "n", {"foo": "bar"}) == 2
    assert preferred_affinity_score(affinity, "n", {"key": "value"}) == 4
    assert preferred_affinity_score(affinity, "n", {"foo": "bar", "key": "value", "az": "az1"}) == 11
    assert preferred_affinity_score(affinity, "n", {"other": "x"}) == 0
    assert preferred_affinity_score(None, "n", {"foo": "bar"}) == 0


def test_an_empty_preference_scores_nothing() -> None:
    affinity = preferred((7, {}), (3, {"matchFields": [field_in("n1")]}))
    assert preferred_affinity_score(affinity, "n1", {}) == 3
    assert preferred_affinity_score(affinity, "n2", {}) == 0
