"""Gangs as Kubernetes' Workload API (KEP-4671 / KEP-5732), KAI and Kueue's extra annotations write them,
translated onto the one gang search: tables from each framework's documented semantics."""

from __future__ import annotations

import msgspec
import pytest
from gang_api_builders import (
    HOST,
    RACK,
    ZONE,
    hard,
    kai_group,
    kube_group,
    layers,
    soft,
)

from schemas.errors import FieldError
from schemas.gangs import (
    KUEUE_PODSET_GROUP,
    KUEUE_REQUIRED,
    KUEUE_SLICE_LAYERS,
    KUEUE_SLICE_REQUIRED,
    KUEUE_SLICE_SIZE,
    KUEUE_UNCONSTRAINED,
    kueue_policy,
)
from schemas.gangs_kai import KAI_PREFERRED, KAI_REQUIRED, KAI_SUBGROUP_LABEL, kai_policy
from schemas.gangs_kube import Workload, from_template, kube_policy, resolved

# --- Kubernetes' Workload API: (spec, minimum, constraint) -------------------------------------------
KUBE_CASES = {
    "gang minCount": ({"schedulingPolicy": {"gang": {"minCount": 3}}}, 3, None),
    "basic is no gang": ({"schedulingPolicy": {"basic": {}}}, 1, None),
    "a topology key is hard": (
        {"schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": {"topology": [{"key": RACK}]}},
        2,
        hard(RACK),
    ),
    "basic with a topology key keeps the domain": (
        {"schedulingPolicy": {"basic": {}}, "schedulingConstraints": {"topology": [{"key": ZONE}]}},
        1,
        hard(ZONE),
    ),
}


@pytest.mark.parametrize("case", KUBE_CASES, ids=list(KUBE_CASES))
def test_kubernetes_pod_group_policies(case: str) -> None:
    spec, minimum, network = KUBE_CASES[case]
    assert kube_policy(kube_group(spec)) == (minimum, network)


KUBE_ERRORS = {
    "neither policy": ({}, "spec.schedulingPolicy"),
    "both policies": ({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}, "spec.schedulingPolicy"),
    "minCount 0": ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "spec.schedulingPolicy.gang.minCount"),
    "two topology constraints": (
        {"schedulingPolicy": {"basic": {}}, "schedulingConstraints": {"topology": [{"key": RACK}, {"key": ZONE}]}},
        "spec.schedulingConstraints.topology",
    ),
}


@pytest.mark.parametrize("case", KUBE_ERRORS, ids=list(KUBE_ERRORS))
def test_kubernetes_pod_group_errors_name_the_field(case: str) -> None:
    spec, field = KUBE_ERRORS[case]
    with pytest.raises(FieldError) as caught:
        kube_policy(kube_group(spec))
    assert caught.value.field == field


def test_a_pod_group_takes_what_it_leaves_out_from_its_workload_template() -> None:
    workload = msgspec.convert(
        {
            "metadata": {"name": "job"},
            "spec": {
                "podGroupTemplates": [
                    {
                        "name": "workers",
                        "schedulingPolicy": {"gang": {"minCount": 4}},
                        "schedulingConstraints": {"topology": [{"key": RACK}]},
                    }
                ]
            },
        },
        Workload,
    )
    ref = {"workload": {"workloadName": "job", "podGroupTemplateName": "workers"}}
    assert kube_policy(resolved(kube_group({"podGroupTemplateRef": ref}), workload)) == (4, hard(RACK))
    missing = {"workload": {"workloadName": "job", "podGroupTemplateName": "ps"}}
    with pytest.raises(FieldError, match="no template 'ps'"):
        resolved(kube_group({"podGroupTemplateRef": missing}), workload)


def test_a_v1alpha1_workload_pod_group_is_one_gang_per_replica_key() -> None:
    workload = msgspec.convert(
        {"metadata": {"name": "job"}, "spec": {"podGroups": [{"name": "w", "policy": {"gang": {"minCount": 2}}}]}},
        Workload,
    )
    template = workload.template("w")
    assert template is not None
    group = from_template(workload, template, "1")
    assert group.metadata.name == "job-w-1"
    assert kube_policy(group) == (2, None)


# --- KAI: PodGroup constraints, annotations and subgroups ---------------------------------------------
def test_kai_required_is_hard_and_preferred_alone_is_soft() -> None:
    both = {"topologyConstraint": {"requiredTopologyLevel": ZONE, "preferredTopologyLevel": RACK}}
    assert kai_policy(kai_group(both), {}) == (hard(ZONE), ())
    preferred = {"topologyConstraint": {"preferredTopologyLevel": RACK}}
    assert kai_policy(kai_group(preferred), {}) == (soft(RACK), ())


def test_kai_placement_annotations_are_read_from_the_pod_group_else_its_pods() -> None:
    on_group = kai_group({}, {KAI_REQUIRED: RACK})
    assert kai_policy(on_group, {KAI_REQUIRED: ZONE})[0] == hard(RACK)
    assert kai_policy(kai_group({}), {KAI_PREFERRED: ZONE})[0] == soft(ZONE)
    assert kai_policy(kai_group({}), {})[0] is None


def test_kai_subgroups_are_policies_by_their_label_each_required_at_its_min_member() -> None:
    spec = {
        "minMember": 5,
        "subGroups": [
            {"name": "a", "minMember": 2, "topologyConstraint": {"requiredTopologyLevel": RACK}},
            {"name": "b", "minMember": 3},
            {"name": "elastic", "minMember": 0},
        ],
    }
    _, policies = kai_policy(kai_group(spec), {})
    assert [(p.name, p.sub_group_size, p.min_sub_groups, p.network) for p in policies] == [
        ("a", 2, 1, hard(RACK)),
        ("b", 3, 1, None),
        ("elastic", 0, 0, None),
    ]
    assert all(p.match_label_keys == (KAI_SUBGROUP_LABEL,) for p in policies)


def test_kai_nested_subgroups_are_policies_whose_parent_holds_their_members() -> None:
    spec = {
        "subGroups": [
            {"name": "parent", "topologyConstraint": {"requiredTopologyLevel": ZONE}},
            {"name": "a", "parent": "parent", "minMember": 1, "topologyConstraint": {"requiredTopologyLevel": RACK}},
            {"name": "b", "parent": "parent", "minMember": 1},
            {"name": "c", "minMember": 1},
        ]
    }
    _, policies = kai_policy(kai_group(spec), {})
    assert [(p.name, p.parent, p.network, p.sub_group_size) for p in policies] == [
        ("parent", "", hard(ZONE), 0),
        ("c", "", None, 1),
        ("a", "parent", hard(RACK), 1),
        ("b", "parent", None, 1),
    ]
    selector = policies[0].label_selector
    assert selector is not None and selector.match_expressions[0].values == ("a", "b")


KAI_ERRORS = {
    "unknown parent": ({"subGroups": [{"name": "a", "parent": "x"}]}, "spec.subGroups[0].parent"),
    "a parent loop": (
        {"subGroups": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]},
        "spec.subGroups[0].parent",
    ),
    "a name twice": ({"subGroups": [{"name": "a"}, {"name": "a"}]}, "spec.subGroups[1].name"),
    "minMember 0": ({"minMember": 0}, "spec.minMember"),
}


@pytest.mark.parametrize("case", KAI_ERRORS, ids=list(KAI_ERRORS))
def test_kai_pod_group_errors_name_the_field(case: str) -> None:
    spec, field = KAI_ERRORS[case]
    with pytest.raises(FieldError) as caught:
        kai_policy(kai_group(spec), {})
    assert caught.value.field == field


# --- Kueue's extra annotations --------------------------------------------------------------------
def test_kueue_unconstrained_is_no_requirement_and_required_comes_first() -> None:
    assert kueue_policy({KUEUE_UNCONSTRAINED: "true"}) == (None, ())
    assert kueue_policy({KUEUE_UNCONSTRAINED: "true", KUEUE_REQUIRED: RACK}) == (hard(RACK), ())
    with pytest.raises(FieldError, match="must be true or false"):
        kueue_policy({KUEUE_UNCONSTRAINED: "maybe"})


def test_kueue_multi_layer_slices_are_nested_slice_policies() -> None:
    _, (one,) = kueue_policy({KUEUE_SLICE_LAYERS: layers((RACK, 2))})
    assert (one.name, one.sub_group_size, one.network, one.parent) == ("slice", 2, hard(RACK), "")
    _, policies = kueue_policy({KUEUE_SLICE_LAYERS: layers((ZONE, 4), (RACK, 2))})
    assert [(p.name, p.sub_group_size, p.network, p.parent) for p in policies] == [
        ("slice", 4, hard(ZONE), ""),
        ("slice2", 2, hard(RACK), "slice"),
    ]


KUEUE_ERRORS = {
    "four layers": ({KUEUE_SLICE_LAYERS: layers((ZONE, 8), (RACK, 4), (HOST, 2), ("x", 1))}, "1 to 3 layers"),
    "a size that does not divide": ({KUEUE_SLICE_LAYERS: layers((ZONE, 6), (RACK, 4))}, "evenly divide"),
    "a level twice": ({KUEUE_SLICE_LAYERS: layers((RACK, 4), (RACK, 2))}, "given twice"),
    "not JSON": ({KUEUE_SLICE_LAYERS: "rack"}, "JSON list"),
    "with the two-level pair": ({KUEUE_SLICE_LAYERS: layers((RACK, 2)), KUEUE_SLICE_REQUIRED: RACK}, "may not be set"),
    "a group without a level": ({KUEUE_PODSET_GROUP: "g"}, "needs"),
}


@pytest.mark.parametrize("case", KUEUE_ERRORS, ids=list(KUEUE_ERRORS))
def test_kueue_annotation_errors(case: str) -> None:
    annotations, reason = KUEUE_ERRORS[case]
    with pytest.raises(FieldError, match=reason):
        kueue_policy(annotations)


def test_a_kueue_pod_set_group_with_its_level_is_one_gang() -> None:
    network, _ = kueue_policy({KUEUE_PODSET_GROUP: "g", KUEUE_REQUIRED: RACK, KUEUE_SLICE_SIZE: "2"})
    assert network == hard(RACK)
