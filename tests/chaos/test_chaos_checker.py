"""The chaos checker finds each kind of violation, and none in a sound cluster."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from schemas.annotations import DEVICES, NODE, encode_devices
from schemas.events import DeviceAssignment
from services.collector.cluster.gangs import VOLCANO_GROUP_ANNOTATION
from topoplace.dev.chaos.checker import ClusterObjects, judge


def node(name: str = "n1", gpus: int = 2) -> dict[str, Any]:
    capacity = {"cpu": "8", "nvidia.com/gpu": str(gpus), "pods": "110"}
    return {"metadata": {"name": name}, "status": {"allocatable": capacity, "capacity": capacity}}


def pod(
    name: str,
    *,
    node_name: str = "",
    devices: tuple[tuple[int, int, int], ...] = (),
    gpus: str = "1",
    group: str = "",
    unschedulable: str = "",
    annotated_node: str | None = None,
    since: str = "",
) -> dict[str, Any]:
    """`since`: the PodScheduled condition's lastTransitionTime (the binding's, once bound)."""
    annotations: dict[str, str] = {}
    if devices:
        annotations[DEVICES] = encode_devices(
            tuple(DeviceAssignment(index=i, memory_mib=m, cores=c) for i, m, c in devices)
        )
        annotations[NODE] = annotated_node if annotated_node is not None else node_name
    if group:
        annotations[VOLCANO_GROUP_ANNOTATION] = group
    status: dict[str, Any] = {"phase": "Pending"}
    if unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
        ]
    elif node_name and since:
        status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    if since:
        status["conditions"][0]["lastTransitionTime"] = since
    spec: dict[str, Any] = {
        "schedulerName": "topoplace",
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": spec,
        "status": status,
    }


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}


def kinds(*pods: dict[str, Any], podgroups: tuple[dict[str, Any], ...] = (), nodes: int = 2) -> list[str]:
    verdict = judge(ClusterObjects(pods=pods, nodes=(node(gpus=nodes),), podgroups=podgroups))
    return sorted(v.kind for v in verdict.violations)


def test_a_sound_cluster_has_no_violation_and_counts_outcomes() -> None:
    objects = ClusterObjects(
        pods=(
            pod("a", node_name="n1", devices=((0, 0, 100),)),
            pod("b", node_name="n1", devices=((1, 4000, 50),)),
            pod("c", node_name="n1", devices=((1, 4000, 50),), gpus="0"),
            pod("d", unschedulable="0/1 nodes: too few GPUs"),
        ),
        nodes=(node(),),
    )
    verdict = judge(objects)
    assert verdict.violations == ()
    assert (verdict.bound, verdict.unschedulable, verdict.unconverged) == (3, 1, ())


def test_a_pending_pod_without_a_reason_is_unconverged() -> None:
    verdict = judge(ClusterObjects(pods=(pod("a"), pod("b", unschedulable="")), nodes=(node(),)))
    assert verdict.unconverged == ("default/a", "default/b")


def test_a_device_held_whole_by_one_pod_and_by_another_is_a_conflict() -> None:
    assert kinds(
        pod("a", node_name="n1", devices=((0, 0, 100),)),
        pod("b", node_name="n1", devices=((0, 0, 100),), gpus="0"),
    ) == ["capacity_exceeded", "device_conflict"]


def test_a_finished_pod_holds_nothing() -> None:
    done = pod("b", node_name="n1", devices=((0, 0, 100),))
    done["status"]["phase"] = "Succeeded"
    assert kinds(pod("a", node_name="n1", devices=((0, 0, 100),)), done) == []


def test_shares_over_a_whole_device_exceed_its_capacity() -> None:
    assert kinds(
        pod("a", node_name="n1", devices=((0, 4000, 60),)),
        pod("b", node_name="n1", devices=((0, 4000, 60),), gpus="0"),
    ) == ["capacity_exceeded"]


def test_requests_beyond_the_nodes_allocatable_overcommit_it() -> None:
    assert kinds(pod("a", node_name="n1", gpus="2"), pod("b", node_name="n1", gpus="1")) == ["node_overcommitted"]
    assert kinds(pod("a", node_name="n1", gpus="2"), pod("b", node_name="n1", gpus="0")) == []


def test_a_device_the_node_does_not_have_and_a_wrong_node_annotation_are_found() -> None:
    assert kinds(pod("a", node_name="n1", devices=((5, 0, 100),))) == ["unknown_device"]
    assert kinds(pod("a", node_name="n1", devices=((0, 0, 100),), annotated_node="n2")) == ["unknown_device"]


def test_an_unreadable_device_annotation_is_found() -> None:
    bad = pod("a", node_name="n1")
    bad["metadata"]["annotations"][DEVICES] = '[{"index": "zero"}]'
    assert kinds(bad) == ["bad_annotation"]


@pytest.mark.parametrize(("bound", "expected"), [(0, []), (2, ["gang_partly_bound"]), (3, [])])
def test_a_gang_is_bound_whole_or_not_at_all(bound: int, expected: list[str]) -> None:
    members = [
        pod(f"g-{i}", node_name="n1" if i < bound else "", group="g", gpus="0", unschedulable="" if i < bound else "x")
        for i in range(3)
    ]
    assert kinds(*members, podgroups=(podgroup("g", 3),)) == expected


def test_a_gang_whose_missing_members_are_still_in_flight_is_unconverged_not_broken() -> None:
    # Two members bound, the third pending without a reason: being bound, or placed again.
    members = [pod(f"g-{i}", node_name="n1" if i < 2 else "", group="g", gpus="0") for i in range(3)]
    verdict = judge(ClusterObjects(pods=tuple(members), nodes=(node(),), podgroups=(podgroup("g", 3),)))
    assert verdict.violations == () and verdict.unconverged == ("default/g-2",)
    # Once the system gives up on that member, the gang is partly bound.
    members[2] = pod("g-2", group="g", gpus="0", unschedulable="0/1 nodes are available")
    assert kinds(*members, podgroups=(podgroup("g", 3),)) == ["gang_partly_bound"]


@pytest.mark.parametrize("told_at", ["2026-01-01T10:00:04Z", "2026-01-01T10:00:05Z"])
def test_a_reason_no_newer_than_the_gangs_first_binding_is_stale_so_the_member_is_still_in_flight(
    told_at: str,
) -> None:
    # The gang did not fit (every member told so), then capacity freed: two members are bound,
    # the third still carries the earlier answer while its binding is retried.
    members = [
        pod("g-0", node_name="n1", group="g", gpus="0", since="2026-01-01T10:00:05Z"),
        pod("g-1", node_name="n1", group="g", gpus="0", since="2026-01-01T10:00:09Z"),
        pod("g-2", group="g", gpus="0", unschedulable="gang g did not fit", since=told_at),
    ]
    verdict = judge(ClusterObjects(pods=tuple(members), nodes=(node(),), podgroups=(podgroup("g", 3),)))
    assert verdict.violations == ()
    assert verdict.unconverged == ("default/g-2",) and verdict.unschedulable == 0


def test_a_reason_newer_than_the_gangs_first_binding_leaves_it_partly_bound() -> None:
    members = [
        pod("g-0", node_name="n1", group="g", gpus="0", since="2026-01-01T10:00:05Z"),
        pod("g-1", node_name="n1", group="g", gpus="0", since="2026-01-01T10:00:09Z"),
        pod("g-2", group="g", gpus="0", unschedulable="0/1 nodes are available", since="2026-01-01T10:00:06Z"),
    ]
    verdict = judge(ClusterObjects(pods=tuple(members), nodes=(node(),), podgroups=(podgroup("g", 3),)))
    assert [v.kind for v in verdict.violations] == ["gang_partly_bound"]
    assert verdict.unconverged == () and verdict.unschedulable == 1


def test_the_verdict_crosses_module_boundaries_as_a_struct() -> None:
    verdict = judge(ClusterObjects(pods=(), nodes=()))
    assert msgspec.json.decode(msgspec.json.encode(verdict), type=type(verdict)) == verdict


def test_a_dra_node_has_the_devices_its_slices_publish() -> None:
    from topoplace.dev.chaos.checker import ClusterObjects, judge

    node = {"metadata": {"name": "d"}, "status": {"allocatable": {"cpu": "8"}}}
    pod = {
        "metadata": {"name": "p", "namespace": "default", "uid": "u", "annotations": {
            "topoplace.io/devices": '[{"index":1,"uuid":"GPU-b","memory_mib":0,"cores":100}]',
            "topoplace.io/node": "d"}},
        "spec": {"schedulerName": "topoplace", "nodeName": "d", "containers": []},
        "status": {"phase": "Running"},
    }  # fmt: skip
    published = {"spec": {"nodeName": "d", "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}
    assert [v.kind for v in judge(ClusterObjects(pods=(pod,), nodes=(node,))).violations] == ["unknown_device"]
    assert judge(ClusterObjects(pods=(pod,), nodes=(node,), slices=(published,))).violations == ()
