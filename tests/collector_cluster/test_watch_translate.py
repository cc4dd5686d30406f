"""Pod / node / HyperNode objects -> events, without I/O."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from cluster_objects import container, hypernode, node, pod

from schemas import annotations as pod_annotations
from schemas.events import DeviceAssignment, GangRef, HyperNodeMember, LifecyclePhase, MemberKind
from services.collector import watch_translate as tr


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", Decimal(2)),
        ("100m", Decimal("0.1")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1k", Decimal(1000)),
        ("1e3", Decimal(1000)),
        (3, Decimal(3)),
    ],
)
def test_parse_quantity(text: str | int, value: Decimal) -> None:
    assert tr.parse_quantity(text) == value


def test_parse_quantity_rejects_garbage_naming_it() -> None:
    with pytest.raises(ValueError, match="'lots' is not a Kubernetes quantity"):
        tr.parse_quantity("lots")


def test_requests_sum_over_containers_and_fall_back_to_limits() -> None:
    p = pod(
        "p",
        containers=[
            container("a", requests={"cpu": "500m"}, limits={"nvidia.com/gpu": "2", "cpu": "1"}),
            container("b", requests={"cpu": "250m", "nvidia.com/gpumem": "8000"}, limits={"nvidia.com/gpu": "1"}),
        ],
    )
    requests, problems = tr.pod_requests(p)
    assert problems == []
    # cpu: requests win over limits (0.5 + 0.25); gpus only have limits (2 + 1); gpumem appears once
    assert requests == {"cpu": "750m", "nvidia.com/gpu": "3", "nvidia.com/gpumem": "8000"}


def test_a_resource_named_once_keeps_its_spelling() -> None:
    requests, _ = tr.pod_requests(pod("p", containers=[container("a", requests={"memory": "16Gi"})]))
    assert requests == {"memory": "16Gi"}


def test_init_containers_raise_the_request_to_their_largest() -> None:
    p = pod(
        "p",
        containers=[container("a", limits={"nvidia.com/gpu": "1"}), container("b", limits={"nvidia.com/gpu": "1"})],
        init_containers=[
            container("i", limits={"nvidia.com/gpu": "4", "cpu": "2"}),
            container("j", limits={"nvidia.com/gpu": "3"}),
        ],
    )
    requests, _ = tr.pod_requests(p)
    assert requests == {"nvidia.com/gpu": "4", "cpu": "2"}


def test_bad_quantity_is_passed_on_and_reported() -> None:
    p = pod(
        "p",
        containers=[container("a", limits={"nvidia.com/gpu": "two"}), container("b", limits={"nvidia.com/gpu": "1"})],
    )
    requests, problems = tr.pod_requests(p)
    assert requests == {"nvidia.com/gpu": "two"}
    assert [(pr.object, pr.field) for pr in problems] == [("default/p", "spec.containers[*].resources.nvidia.com/gpu")]
    assert "'two'" in problems[0].reason


def test_pending_event_carries_the_pod() -> None:
    created = "2026-03-01T10:00:00Z"
    p = pod(
        "train-0",
        namespace="ml",
        uid="u-1",
        annotations={"a": "1"},
        labels={"app": "train"},
        creationTimestamp=created,
        ownerReferences=[
            {"kind": "ReplicaSet", "name": "other", "uid": "x"},
            {"kind": "Job", "name": "train", "uid": "y", "controller": True},
        ],
    )
    p.spec.priority = 1000
    event, problems = tr.pending_event(p, observed_at=5.0)
    assert problems == []
    assert (event.uid, event.namespace, event.name, event.resource_version) == ("u-1", "ml", "train-0", "7")
    assert event.requests == {"nvidia.com/gpu": "1"}
    assert event.annotations == {"a": "1"} and event.labels == {"app": "train"}
    assert event.owner == "Job/train"  # the controlling owner, not the first
    assert event.priority == 1000
    assert event.created_at == dt.datetime(2026, 3, 1, 10, tzinfo=dt.UTC).timestamp()
    assert event.observed_at == 5.0 and event.gang is None


@pytest.mark.parametrize(
    ("annotations_", "labels", "gang"),
    [
        ({tr.GANG_NAME_ANNOTATION: "job-a"}, {}, GangRef(name="ml/job-a", min_member=1)),
        (
            {tr.GANG_NAME_ANNOTATION: "job-a", "scheduling.k8s.io/min-member": "4"},
            {},
            GangRef(name="ml/job-a", min_member=4),
        ),
        (
            {},
            {tr.GANG_NAME_LABEL: "pg", "pod-group.scheduling.sigs.k8s.io/min-available": "2"},
            GangRef(name="ml/pg", min_member=2),
        ),
        ({}, {}, None),
    ],
)
def test_gang_from_annotation_or_label(
    annotations_: dict[str, str], labels: dict[str, str], gang: GangRef | None
) -> None:
    event, problems = tr.pending_event(pod("p", namespace="ml", annotations=annotations_, labels=labels), 0.0)
    assert event.gang == gang and problems == []


def test_bad_min_member_is_reported_and_one_is_used() -> None:
    gang, problems = tr.gang_of(
        pod("p", annotations={tr.GANG_NAME_ANNOTATION: "g", "scheduling.k8s.io/min-member": "0"})
    )
    assert gang == GangRef(name="default/g", min_member=1)
    assert problems[0].field == "scheduling.k8s.io/min-member"


def test_bound_event_decodes_the_device_annotation() -> None:
    devices = (
        DeviceAssignment(index=2, uuid="GPU-2"),
        DeviceAssignment(index=3, uuid="GPU-3", memory_mib=8000, cores=50),
    )
    p = pod(
        "p",
        node="gpu-1",
        annotations={
            pod_annotations.DEVICES: pod_annotations.encode_devices(devices),
            pod_annotations.NODE: "gpu-1",
            tr.QOS_ANNOTATION: "fixed-share",
        },
    )
    event, problems = tr.bound_event(p, 1.0)
    assert problems == []
    assert event.phase is LifecyclePhase.BOUND and event.node == "gpu-1"
    assert event.devices == devices and event.qos == "fixed-share"


@pytest.mark.parametrize(
    ("annotations_", "field"),
    [
        ({pod_annotations.DEVICES: '[{"index": "zero"}]'}, f"metadata.annotations[{pod_annotations.DEVICES}]"),
        ({pod_annotations.DEVICES: "not json"}, f"metadata.annotations[{pod_annotations.DEVICES}]"),
        (
            {pod_annotations.DEVICES: '[{"index": 0}]', pod_annotations.NODE: "elsewhere"},
            f"metadata.annotations[{pod_annotations.NODE}]",
        ),
    ],
)
def test_undecodable_devices_give_no_devices_and_a_problem(annotations_: dict[str, str], field: str) -> None:
    event, problems = tr.bound_event(pod("p", node="gpu-1", annotations=annotations_), 1.0)
    assert event.devices == () and event.node == "gpu-1"
    assert [p.field for p in problems] == [field] and problems[0].reason


def test_node_status_event() -> None:
    event = tr.node_status_event(node("gpu-1", unschedulable=True, labels={"zone": "a"}), 2.0)
    assert event.node == "gpu-1" and event.labels == {"zone": "a"}
    assert event.allocatable == {"nvidia.com/gpu": "8", "cpu": "64"}
    assert event.ready is True and event.unschedulable is True and event.deleted is False
    assert tr.node_status_event(node("n", ready=False), 0).ready is False


def test_node_without_ready_condition_is_not_ready() -> None:
    n = node("n")
    n.status.conditions = []
    assert tr.node_status_event(n, 0).ready is False


def test_hypernode_event_takes_exact_matches_and_reports_the_rest() -> None:
    h = hypernode("tor-1", 1, [("Node", "n1"), ("HyperNode", "sub")])
    h.spec.members.append(type(h.spec.members[0])(type="Node"))  # a selector without exactMatch
    event, problems = tr.hypernode_event(h, 3.0)
    assert event.name == "tor-1" and event.tier == 1
    assert event.members == (
        HyperNodeMember(kind=MemberKind.NODE, name="n1"),
        HyperNodeMember(kind=MemberKind.HYPERNODE, name="sub"),
    )
    assert [p.field for p in problems] == ["spec.members[2].selector"]
