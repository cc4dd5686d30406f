"""Decoding the Kubernetes JSON of taints, tolerations and node affinity; bad values name the field."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from engine.node.vendor import RequestError
from schemas.kube import (
    Affinity,
    NodeSelectorRequirement,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    parse_int64,
)


def test_affinity_decodes_from_the_pod_spec_json_ignoring_pod_affinity() -> None:
    raw = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100", "h100"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 20, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}
            ],
        },
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
    }
    affinity = msgspec.json.decode(msgspec.json.encode(raw), type=Affinity)
    assert affinity.node_affinity is not None
    required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    first, second = required.node_selector_terms
    assert first.match_expressions == (NodeSelectorRequirement(key="gpu", operator="In", values=("a100", "h100")),)
    assert second.match_fields[0].values == ("n1",)
    (preferred,) = affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    assert preferred.weight == 20


def test_taints_and_tolerations_decode_with_defaults() -> None:
    taint = msgspec.json.decode(b'{"key":"gpu","effect":"NoSchedule","timeAdded":null}', type=Taint)
    assert taint == Taint(key="gpu", value="", effect="NoSchedule")
    toleration = msgspec.json.decode(
        b'{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}',
        type=Toleration,
    )
    assert toleration.toleration_seconds == 300
    assert msgspec.json.decode(b'{"key":"a","value":"b"}', type=Toleration).operator == "Equal"


@pytest.mark.parametrize(
    ("build", "field", "reason"),
    [
        (lambda: NodeSelectorRequirement(key="a", operator="Like", values=("x",)), "operator", "unknown operator"),
        (lambda: NodeSelectorRequirement(key="a", operator="In"), "values", "must be given when operator is In"),
        (lambda: NodeSelectorRequirement(key="a", operator="NotIn"), "values", "must be given"),
        (lambda: NodeSelectorRequirement(key="a", operator="Exists", values=("x",)), "values", "must be empty"),
        (lambda: NodeSelectorRequirement(key="a", operator="DoesNotExist", values=("x",)), "values", "must be empty"),
        (lambda: NodeSelectorRequirement(key="a", operator="Gt", values=("1.5",)), "values", "one integer"),
        (lambda: NodeSelectorRequirement(key="a", operator="Lt", values=("1", "2")), "values", "one integer"),
        (lambda: NodeSelectorRequirement(key="a", operator="Gt"), "values", "one integer"),
        (lambda: NodeSelectorRequirement(key="", operator="Exists"), "key", "needs a key"),
        (lambda: Taint(key="gpu", effect="NoWay"), "effect", "unknown taint effect 'NoWay'"),
        (lambda: Taint(key="", effect="NoSchedule"), "key", "needs a key"),
        (lambda: Toleration(key="a", operator="Gte"), "operator", "unknown toleration operator"),
        (lambda: Toleration(key="", operator="Equal", value="x"), "operator", "must be Exists when key is empty"),
        (lambda: Toleration(key="a", operator="Exists", value="x"), "value", "must be empty"),
        (lambda: Toleration(key="a", effect="Sometimes"), "effect", "unknown taint effect"),
        (lambda: Toleration(key="a", effect="NoSchedule", toleration_seconds=5), "tolerationSeconds", "NoExecute"),
    ],
)
def test_invalid_values_name_the_field(build: Any, field: str, reason: str) -> None:
    with pytest.raises(RequestError, match=reason) as caught:
        build()
    assert caught.value.field == field


@pytest.mark.parametrize("weight", [0, 101, -1])
def test_preference_weight_must_be_1_to_100(weight: int) -> None:
    raw = {"weight": weight, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}
    with pytest.raises(msgspec.ValidationError, match=r"weight: must be between 1 and 100"):
        msgspec.json.decode(msgspec.json.encode(raw), type=PreferredSchedulingTerm)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ([{"key": "metadata.namespace", "operator": "In", "values": ["x"]}], "matchFields.key: must be metadata.name"),
        ([{"key": "metadata.name", "operator": "Exists"}], "matchFields.operator: must be In or NotIn"),
        ([{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}], "matchFields.values: must be one"),
    ],
)
def test_match_fields_name_one_node(fields: list[dict[str, Any]], reason: str) -> None:
    raw = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": fields}]}
        }
    }
    with pytest.raises(msgspec.ValidationError, match=reason):
        msgspec.json.decode(msgspec.json.encode(raw), type=Affinity)


def test_decode_errors_carry_the_json_path() -> None:
    term = {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}
    raw = msgspec.json.encode(
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    )
    with pytest.raises(msgspec.ValidationError, match=r"values: must be one integer.*matchExpressions\[0\]"):
        msgspec.json.decode(raw, type=Affinity)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("0", 0),
        ("42", 42),
        ("-7", -7),
        ("+7", 7),
        ("007", 7),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),
        ("-9223372036854775808", -(2**63)),
        ("1.0", None),
        ("1e3", None),
        (" 1", None),
        ("1_000", None),
        ("", None),
        ("\u0661", None),
    ],
)
def test_parse_int64_is_go_parse_int(text: str, number: int | None) -> None:
    assert parse_int64(text) == number
