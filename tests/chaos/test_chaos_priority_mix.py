"""The chaos run's priority mix and preemption's invariants in its checker: no victim of higher or equal
priority, no victim evicted for a preemptor left unbound; a Preempted Event on another scheduler's pod is
kube's behaviour, not a foreign pod touched."""

from __future__ import annotations

from typing import Any

from topoplace.dev.chaos.checker import ClusterObjects, judge
from topoplace.dev.chaos.priority_mix import HIGH, LOW, VALUES, mix

NODES = ({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "pods": "110"}}},)


def pod(name: str, uid: str, priority: int, node: str = "", scheduler: str = "topoplace") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler, "priority": priority, "containers": []}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "chaos", "uid": uid}, "spec": spec, "status": {}}


def preempted(victim: str, victim_uid: str, preemptor_uid: str) -> dict[str, Any]:
    return {
        "reason": "Preempted",
        "message": f"Preempted by pod {preemptor_uid} on node n1",
        "source": {"component": "topoplace"},
        "involvedObject": {"kind": "Pod", "namespace": "chaos", "name": victim, "uid": victim_uid},
    }


def kinds(objects: ClusterObjects, priorities: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in judge(objects, priorities=priorities).by_kind().items() if v}


def test_every_nth_pod_is_of_high_priority() -> None:
    pods = [{"metadata": {"name": f"p{i}"}, "spec": {}} for i in range(50)]
    priorities = mix(pods, every=25)
    assert [p["metadata"]["name"] for p in pods if p["spec"]["priorityClassName"] == HIGH] == ["p24", "p49"]
    assert priorities["p24"] == VALUES[HIGH] and priorities["p0"] == VALUES[LOW]


def test_a_sound_preemption_breaks_nothing() -> None:
    objects = ClusterObjects(
        nodes=NODES, pods=(pod("hi", "u-hi", 1000, node="n1"),), events=(preempted("lo", "u-lo", "u-hi"),)
    )
    assert kinds(objects, {"lo": 0, "hi": 1000}) == {}


def test_a_victim_of_equal_priority_and_an_unbound_preemptor_are_violations() -> None:
    objects = ClusterObjects(
        nodes=NODES, pods=(pod("hi", "u-hi", 1000),), events=(preempted("peer", "u-peer", "u-hi"),)
    )
    assert kinds(objects, {"peer": 1000, "hi": 1000}) == {"preempted_not_lower": 1, "wasted_preemption": 1}


def test_a_preempted_pod_of_another_scheduler_is_no_foreign_pod_touched() -> None:
    foreign = pod("squatter", "u-sq", 0, node="n1", scheduler="default-scheduler")
    objects = ClusterObjects(
        nodes=NODES, pods=(foreign, pod("hi", "u-hi", 1000, node="n1")), events=(preempted("squatter", "u-sq", "u-hi"),)
    )
    assert "foreign_pod_touched" not in kinds(objects, {"hi": 1000})
