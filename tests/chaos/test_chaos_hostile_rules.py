"""The checker's rules for a hostile run: pods of other schedulers stay untouched, and no pod of ours is
bound against its node's taints or its nodeSelector; the hostile tenant's objects are what they claim."""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.annotations import DECISION, DEVICES, encode_devices
from schemas.events import DeviceAssignment
from schemas.seal import SEAL, DecisionKey
from topoplace.dev.chaos.checker import ClusterObjects, judge
from topoplace.dev.chaos.hostile import OVERSIZED_BYTES, REGEX_NODE, control_plane_node, oversized_pod, regex_hypernode


def node(name: str, *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> Any:
    capacity = {"cpu": "8", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def pod(name: str, *, scheduler: str = "topoplace", node_name: str = "", uid: str = "", **spec: Any) -> Any:
    body: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c"}], **spec}
    if node_name:
        body["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "annotations": {}},
        "spec": body,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def kinds(objects: ClusterObjects, key: DecisionKey | None = None) -> list[tuple[str, str]]:
    return sorted((v.kind, v.subject) for v in judge(objects, key).violations)


NO_SCHEDULE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def test_a_pod_bound_onto_an_untolerated_taint_is_a_violation_and_a_tolerated_one_is_not() -> None:
    nodes = (node("cp", taints=[NO_SCHEDULE]),)
    bad = pod("bad", node_name="cp")
    good = pod("good", node_name="cp", tolerations=[{"key": NO_SCHEDULE["key"], "operator": "Exists"}])
    everything = pod("all", node_name="cp", tolerations=[{"operator": "Exists"}])
    other_effect = pod("other", node_name="cp", tolerations=[{"operator": "Exists", "effect": "NoExecute"}])
    found = kinds(ClusterObjects(pods=(bad, good, everything, other_effect), nodes=nodes))
    assert found == [("bound_against_rules", "default/bad"), ("bound_against_rules", "default/other")]


def test_a_prefer_no_schedule_taint_binds_no_one_against_the_rules() -> None:
    nodes = (node("n", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),)
    assert kinds(ClusterObjects(pods=(pod("p", node_name="n"),), nodes=nodes)) == []


def test_an_equal_toleration_needs_the_taints_value() -> None:
    nodes = (node("n", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]),)
    wrong = pod("wrong", node_name="n", tolerations=[{"key": "dedicated", "value": "cpu", "effect": "NoExecute"}])
    right = pod("right", node_name="n", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}])
    assert kinds(ClusterObjects(pods=(wrong, right), nodes=nodes)) == [("bound_against_rules", "default/wrong")]


def test_a_pod_bound_against_its_node_selector_is_a_violation() -> None:
    nodes = (node("a", labels={"zone": "a"}), node("b", labels={"zone": "b"}))
    pods = (pod("p", node_name="b", nodeSelector={"zone": "a"}), pod("q", node_name="a", nodeSelector={"zone": "a"}))
    assert kinds(ClusterObjects(pods=pods, nodes=nodes)) == [("bound_against_rules", "default/p")]


def test_a_pod_of_another_scheduler_given_a_condition_an_event_or_a_binding_by_topoplace_is_touched() -> None:
    conditioned = pod("conditioned", scheduler="default-scheduler")
    conditioned["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    bound = pod("bound", scheduler="default-scheduler", node_name="n")
    bound["metadata"]["annotations"][DECISION] = "d-1"
    evented = pod("evented", scheduler="default-scheduler")
    event = {"involvedObject": {"uid": "uid-evented"}, "source": {"component": "topoplace-binder"}, "reason": "X"}
    others_event = {"involvedObject": {"uid": "uid-quiet"}, "source": {"component": "default-scheduler"}}
    squatter = pod("squatter", scheduler="default-scheduler", node_name="n")  # bound by nobody: not ours to judge
    squatter["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]  # the kubelet's
    quiet = pod("quiet", scheduler="default-scheduler")
    objects = ClusterObjects(
        pods=(conditioned, bound, evented, squatter, quiet), nodes=(node("n"),), events=(event, others_event)
    )
    assert kinds(objects) == [
        ("foreign_pod_touched", "default/bound"),
        ("foreign_pod_touched", "default/conditioned"),
        ("foreign_pod_touched", "default/evented"),
    ]


def test_the_hostile_objects_are_what_the_attacks_need() -> None:
    big = oversized_pod("big")
    assert len(msgspec.json.encode(big["metadata"])) > OVERSIZED_BYTES > 1024 * 1024
    assert big["spec"]["schedulerName"] == "topoplace"
    control_plane = control_plane_node()
    assert control_plane["metadata"]["name"] == REGEX_NODE and len(REGEX_NODE) >= 38
    assert control_plane["spec"]["taints"][0]["effect"] == "NoSchedule"
    members = regex_hypernode()["spec"]["members"]
    assert members[0]["selector"]["regexMatch"]["pattern"].startswith("^(\\w+-?)+")


def test_with_the_runs_key_a_pods_devices_are_what_its_seal_says_not_its_edited_annotation() -> None:
    key = DecisionKey(b"k" * 32)
    gpus = {"cpu": "8", "pods": "110", "nvidia.com/gpu": "2"}
    gpu_node = {"metadata": {"name": "n"}, "spec": {}, "status": {"allocatable": gpus, "capacity": gpus}}

    def sealed(name: str, index: int, *, edited_to: int | None = None) -> Any:
        body = pod(name, node_name="n")
        devices = (DeviceAssignment(index=index),)
        body["metadata"]["annotations"] = {
            SEAL: key.seal(body["metadata"]["uid"], "n", f"d-{name}", devices),
            DEVICES: encode_devices((DeviceAssignment(index=index if edited_to is None else edited_to),)),
        }
        return body

    # The tenant rewrote a's annotation to b's device: the seal still says device 0, so nothing collides.
    objects = ClusterObjects(pods=(sealed("a", 0, edited_to=1), sealed("b", 1)), nodes=(gpu_node,))
    assert kinds(objects, key) == []
    # Read from the annotations alone (no key), the edit looks like a device held twice.
    assert ("device_conflict", "n/1") in [(v.kind, v.subject) for v in judge(objects).violations]
    # A pod of ours bound with devices but no seal: a broken annotation, its devices not counted.
    unsealed = pod("c", node_name="n")
    unsealed["metadata"]["annotations"] = {DEVICES: encode_devices((DeviceAssignment(index=1),))}
    found = [(v.kind, v.subject) for v in judge(ClusterObjects(pods=(unsealed,), nodes=(gpu_node,)), key).violations]
    assert found == [("bad_annotation", "default/c")]
