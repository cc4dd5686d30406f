"""The filter chain: kube-scheduler's steps, order and words, per node."""

from __future__ import annotations

import msgspec
import pytest

from engine.decide.kube.filters import (
    FILTER_ORDER,
    NODE_AFFINITY_REASON,
    NODE_NAME_REASON,
    NOT_NAMED_REASON,
    UNSCHEDULABLE_REASON,
    CompiledPodRules,
    NodeFacts,
    PodFacts,
)
from schemas.kube import Affinity, Taint, Toleration

GPU = "nvidia.com/gpu"
ALLOC = {"cpu": 8000, "memory": 64 * 2**30 * 1000, "pods": 110_000, GPU: 8000}


def node(name: str = "n1", **kw: object) -> NodeFacts:
    return msgspec.structs.replace(NodeFacts(name=name, allocatable=dict(ALLOC)), **kw)


def affinity_to(*names: str) -> Affinity:
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in names]
    return msgspec.convert(
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}, Affinity
    )


def test_order_is_kube_schedulers_default() -> None:
    assert FILTER_ORDER == (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
    )


def test_a_plain_pod_fits_a_plain_node() -> None:
    assert CompiledPodRules(PodFacts(requests={"cpu": 1000})).first_failure(node()) is None


def test_a_cordoned_node_is_unschedulable_unless_tolerated() -> None:
    cordoned = node(unschedulable=True)
    assert CompiledPodRules(PodFacts()).first_failure(cordoned) == [UNSCHEDULABLE_REASON]
    tolerant = PodFacts(
        tolerations=(Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),)
    )
    assert CompiledPodRules(tolerant).first_failure(cordoned) is None
    assert CompiledPodRules(PodFacts(tolerations=(Toleration(operator="Exists"),))).first_failure(cordoned) is None
    # a toleration for another effect does not count
    other = PodFacts(
        tolerations=(Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoExecute"),)
    )
    assert CompiledPodRules(other).first_failure(cordoned) == [UNSCHEDULABLE_REASON]


def test_a_pod_naming_a_node_fits_only_there() -> None:
    rules = CompiledPodRules(PodFacts(node_name="n2"))
    assert rules.first_failure(node("n1")) == [NODE_NAME_REASON]
    assert rules.first_failure(node("n2")) is None


def test_untolerated_taint_reason_names_key_and_value() -> None:
    tainted = node(taints=(Taint(key="gpu", value="reserved", effect="NoSchedule"), Taint(key="x", effect="NoExecute")))
    assert CompiledPodRules(PodFacts()).first_failure(tainted) == ["node(s) had untolerated taint {gpu: reserved}"]
    gpu_ok = PodFacts(tolerations=(Toleration(key="gpu", value="reserved"),))
    assert CompiledPodRules(gpu_ok).first_failure(tainted) == ["node(s) had untolerated taint {x: }"]


def test_node_selector_and_affinity() -> None:
    rules = CompiledPodRules(PodFacts(node_selector={"zone": "a"}))
    assert rules.first_failure(node(labels={"zone": "b"})) == [NODE_AFFINITY_REASON]
    assert rules.first_failure(node(labels={"zone": "a"})) is None


def test_resources_all_reasons_together_and_skipped_when_not_reported() -> None:
    rules = CompiledPodRules(PodFacts(requests={"cpu": 9000, GPU: 9000}))
    assert rules.first_failure(node()) == ["Insufficient cpu", f"Insufficient {GPU}"]
    assert rules.first_failure(node(allocatable=None)) is None
    full = node(requested={"cpu": 7500}, pod_count=110)
    assert CompiledPodRules(PodFacts(requests={"cpu": 1000})).first_failure(full) == [
        "Too many pods",
        "Insufficient cpu",
    ]


def test_ignored_resources_are_left_to_the_device_vendors() -> None:
    pod = PodFacts(requests={GPU: 1000, "nvidia.com/gpumem": 8000 * 1000})
    assert CompiledPodRules(pod).first_failure(node()) == ["Insufficient nvidia.com/gpumem"]
    assert CompiledPodRules(pod, ignored_resources={"nvidia.com/gpumem"}).first_failure(node()) is None


@pytest.mark.parametrize(
    ("facts", "step", "reason"),
    [
        # every step fails here; the first in kube's order is the one reported
        ({}, "NodeUnschedulable", UNSCHEDULABLE_REASON),
        ({"unschedulable": False}, "NodeName", NODE_NAME_REASON),
        ({"unschedulable": False, "name": "wanted"}, "TaintToleration", "node(s) had untolerated taint {t: }"),
        ({"unschedulable": False, "name": "wanted", "taints": ()}, "NodeAffinity", NODE_AFFINITY_REASON),
        (
            {"unschedulable": False, "name": "wanted", "taints": (), "labels": {"zone": "a"}},
            "NodeResourcesFit",
            "Insufficient cpu",
        ),
    ],
)
def test_the_first_failing_step_wins(facts: dict[str, object], step: str, reason: str) -> None:
    worst = node(
        "other", unschedulable=True, taints=(Taint(key="t", effect="NoSchedule"),), labels={}, requested={"cpu": 8000}
    )
    rules = CompiledPodRules(PodFacts(node_name="wanted", node_selector={"zone": "a"}, requests={"cpu": 1000}))
    failed = rules.failed_step(msgspec.structs.replace(worst, **facts))
    assert failed is not None
    assert failed == (step, [reason])


def test_named_nodes_narrow_the_search_like_prefilter() -> None:
    rules = CompiledPodRules(PodFacts(affinity=affinity_to("n1", "n3")))
    assert rules.candidate_names == frozenset({"n1", "n3"})
    assert rules.pre_filter_reason is None
    assert rules.first_failure(node("n1")) is None
    # even a node that would fail another filter reports only that it was not named
    assert rules.first_failure(node("n2", unschedulable=True)) == [NOT_NAMED_REASON]
    assert NOT_NAMED_REASON == "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def test_conflicting_names_reject_the_pod_before_any_node() -> None:
    conflict = msgspec.convert(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["a"]},
                                {"key": "metadata.name", "operator": "In", "values": ["b"]},
                            ]
                        }
                    ]
                }
            }
        },
        Affinity,
    )
    rules = CompiledPodRules(PodFacts(affinity=conflict))
    assert rules.pre_filter_reason == "pod affinity terms conflict"
    assert rules.first_failure(node("a")) == ["pod affinity terms conflict"]


def test_scores() -> None:
    preferred = msgspec.convert(
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 30,
                        "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    }
                ]
            }
        },
        Affinity,
    )
    rules = CompiledPodRules(PodFacts(affinity=preferred))
    assert rules.preference_score(node(labels={"zone": "a"})) == 30
    assert rules.preference_score(node(labels={"zone": "b"})) == 0
    soft = node(taints=(Taint(key="a", effect="PreferNoSchedule"), Taint(key="b", effect="PreferNoSchedule")))
    assert rules.intolerable_taints(soft) == 2
    # PreferNoSchedule taints never filter
    assert rules.first_failure(soft) is None
