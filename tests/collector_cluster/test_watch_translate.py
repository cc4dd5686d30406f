"""Pod / node / HyperNode objects -> events, without I/O."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from cluster_objects import container, hypernode_json, node, pod, topology
from decision_keys import TEST_KEY

from engine.core.hypernodes import HyperNode as EngineHyperNode
from engine.core.hypernodes import from_event
from schemas import annotations as pod_annotations
from schemas.events import (
    DeviceAssignment,
    HyperNodeEvent,
    HyperNodeMember,
    LabelSelector,
    LabelSelectorRequirement,
    LifecyclePhase,
    MemberKind,
)
from schemas.kube import (
    Affinity,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from schemas.seal import SEAL, DecisionKey
from services.collector.cluster import network
from services.collector.cluster import translate as tr
from services.collector.cluster.objects import HyperNode

HOSTNAME = "kubernetes.io/hostname"


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
    assert [(pr.object, pr.field) for pr in problems] == [("default/p", "spec.containers[a].resources.nvidia.com/gpu")]
    assert "'two'" in problems[0].reason


def test_sidecars_add_to_the_sum_and_overhead_is_added() -> None:
    sidecar = {**container("proxy", requests={"cpu": "250m", "memory": "64Mi"}), "restartPolicy": "Always"}
    p = pod(
        "p",
        containers=[container("main", requests={"cpu": "1", "memory": "1Gi"})],
        init_containers=[sidecar, container("setup", requests={"cpu": "1500m"})],
        spec_extra={"overhead": {"cpu": "100m", "memory": "16Mi"}},
    )
    requests, problems = tr.pod_requests(p)
    assert problems == []
    # cpu: containers 1 + sidecar 0.25 = 1.25; the init "setup" needs 1.5 + the sidecar 0.25 = 1.75 > 1.25;
    # then the overhead 0.1. memory: 1Gi + 64Mi + 16Mi.
    assert requests == {"cpu": "1850m", "memory": str(2**30 + 80 * 2**20)}


def test_a_result_equal_to_a_written_quantity_keeps_that_spelling() -> None:
    p = pod(
        "p",
        containers=[container("a", requests={"memory": "1Gi"})],
        init_containers=[container("i", requests={"memory": "4Gi"})],
    )
    assert tr.pod_requests(p)[0] == {"memory": "4Gi"}


def test_pending_event_carries_the_node_constraints() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
            }
        },
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
    }
    tolerations = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists", "value": "yes"},  # the API server refuses a value with Exists
    ]
    p = pod("p", spec_extra={"nodeSelector": {"gpu": "h100"}, "affinity": affinity, "tolerations": tolerations})
    event, problems = tr.pending_event(p, 1.0)
    assert event.node_selector == {"gpu": "h100"}
    requirement = NodeSelectorRequirement(key="zone", operator="In", values=("a",))
    term = NodeSelectorTerm(match_expressions=(requirement,))
    assert event.affinity == Affinity(
        node_affinity=NodeAffinity(
            required_during_scheduling_ignored_during_execution=NodeSelector(node_selector_terms=(term,))
        )
    )
    assert event.tolerations == (Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),)
    assert [pr.field for pr in problems] == ["spec.tolerations[1]"] and "Exists" in problems[0].reason


def test_bad_affinity_is_left_out_and_reported() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]
            }
        }
    }
    event, problems = tr.pending_event(pod("p", spec_extra={"affinity": affinity}), 1.0)
    assert event.affinity is None
    assert [pr.field for pr in problems] == ["spec.affinity"] and "Near" in problems[0].reason


def test_pod_affinity_alone_is_no_node_constraint() -> None:
    event, problems = tr.pending_event(pod("p", spec_extra={"affinity": {"podAffinity": {}}}), 1.0)
    assert event.affinity is None and problems == []


def test_bound_event_of_another_scheduler_carries_its_requests() -> None:
    p = pod(
        "web",
        scheduler="default-scheduler",
        node="n1",
        containers=[container("a", requests={"cpu": "2", "memory": "4Gi"})],
        labels={"kueue.x-k8s.io/pod-group-name": "g"},
    )
    event, problems = tr.bound_event(p, 1.0, ours=False, gang="default/g")
    assert problems == []
    assert (event.node, event.ours, event.gang, event.devices) == ("n1", False, "default/g", ())
    assert event.requests == {"cpu": "2", "memory": "4Gi"}


def test_pending_event_carries_the_pod() -> None:
    created = "2026-03-01T10:00:00Z"
    p = pod(
        "train-0",
        namespace="ml",
        uid="u-1",
        annotations={"a": "1", "nvidia.com/use-gputype": "H100"},
        labels={"app": "train", "kueue.x-k8s.io/pod-group-name": "g"},
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
    # the annotations the placer reads (pending_fields), every label (pod affinity and spread read any)
    assert event.annotations == {"nvidia.com/use-gputype": "H100"}
    assert event.labels == {"app": "train", "kueue.x-k8s.io/pod-group-name": "g"}
    assert event.owner == "Job/train"  # the controlling owner, not the first
    assert event.priority == 1000
    assert event.created_at == dt.datetime(2026, 3, 1, 10, tzinfo=dt.UTC).timestamp()
    assert event.observed_at == 5.0 and event.gang is None


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
            SEAL: TEST_KEY.seal("uid-default-p", "gpu-1", "d-1", devices),
            tr.QOS_ANNOTATION: "fixed-share",
        },
    )
    event, problems = tr.bound_event(p, 1.0, ours=True, key=TEST_KEY)
    assert problems == []
    assert event.phase is LifecyclePhase.BOUND and event.node == "gpu-1"
    assert event.devices == devices and event.qos == "fixed-share"
    assert event.requests == {"nvidia.com/gpu": "1"} and event.ours and event.gang == ""


EIGHT = tuple(DeviceAssignment(index=i) for i in range(8))


@pytest.mark.parametrize(
    ("annotations_", "reason"),
    [
        # A pod asking for no GPU, with spec.nodeName and the device annotation: squatting (issue 15, #3).
        ({pod_annotations.DEVICES: pod_annotations.encode_devices(EIGHT)}, "without topoplace.io/seal"),
        ({pod_annotations.DEVICES: "not json"}, "without topoplace.io/seal"),
        ({SEAL: "not json"}, "not a seal"),
        ({SEAL: "x" * 20_000}, "more than a seal's"),
        ({SEAL: TEST_KEY.seal("uid-default-other", "gpu-1", "d-1", EIGHT)}, "does not verify"),  # another pod's
        ({SEAL: TEST_KEY.seal("uid-default-p", "gpu-2", "d-1", EIGHT)}, "sealed for node 'gpu-2'"),
        ({SEAL: DecisionKey(b"someone-elses-key-0123").seal("uid-default-p", "gpu-1", "d-1", EIGHT)}, "not verify"),
    ],
)
def test_devices_without_a_valid_seal_count_for_nothing_and_are_reported(
    annotations_: dict[str, str], reason: str
) -> None:
    squatter = pod("p", node="gpu-1", annotations=annotations_, containers=[container("c")])
    event, problems = tr.bound_event(squatter, 1.0, ours=False, key=TEST_KEY)
    assert event.devices == () and event.node == "gpu-1" and event.requests == {}
    assert [p.field for p in problems] == [f"metadata.annotations[{SEAL}]"]
    assert reason in problems[0].reason and "resource requests only" in problems[0].reason


def test_an_annotation_edited_after_the_bind_changes_no_devices() -> None:
    devices = (DeviceAssignment(index=2),)
    edited = {
        pod_annotations.DEVICES: pod_annotations.encode_devices((DeviceAssignment(index=5),)),
        SEAL: TEST_KEY.seal("uid-default-p", "gpu-1", "d-1", devices),
    }
    event, problems = tr.bound_event(pod("p", node="gpu-1", annotations=edited), 1.0, ours=True, key=TEST_KEY)
    assert event.devices == devices and problems == []


def test_node_status_event() -> None:
    event, problems = tr.node_status_event(node("gpu-1", unschedulable=True, labels={"zone": "a"}), 2.0)
    assert event.node == "gpu-1" and event.labels == {"zone": "a"} and problems == []
    assert event.allocatable == {"nvidia.com/gpu": "8", "cpu": "64"}
    assert event.ready is True and event.unschedulable is True and event.deleted is False
    assert tr.node_status_event(node("n", ready=False), 0)[0].ready is False


def test_node_without_ready_condition_is_not_ready() -> None:
    n = node("n")
    n.status.conditions = []
    assert tr.node_status_event(n, 0)[0].ready is False


def test_node_taints_are_published_and_a_bad_one_is_reported() -> None:
    taints = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "maintenance", "effect": "Sometimes"},
        {"key": "spot", "effect": "PreferNoSchedule", "timeAdded": "2026-01-01T00:00:00Z"},
    ]
    event, problems = tr.node_status_event(node("gpu-1", taints=taints), 1.0)
    assert event.taints == (
        Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule"),
        Taint(key="spot", effect="PreferNoSchedule"),
    )
    assert [(p.object, p.field) for p in problems] == [("gpu-1", "spec.taints[1]")]
    assert "Sometimes" in problems[0].reason


def test_hypernode_event_keeps_every_selector_and_the_tier_name() -> None:
    body = hypernode_json("s0", 2, [("HyperNode", "tor-1")])
    body["spec"]["tierName"] = "spine"
    body["spec"]["members"] += [
        {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}},
        {
            "type": "Node",
            "selector": {
                "labelMatch": {
                    "matchLabels": {"rack": "r1"},
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                }
            },
        },
    ]
    event, problems = network.hypernode_event(msgspec.convert(body, HyperNode), 3.0)
    assert problems == []
    assert (event.name, event.tier, event.tier_name) == ("s0", 2, "spine")
    assert event.members == (
        HyperNodeMember(kind=MemberKind.HYPERNODE, name="tor-1"),
        HyperNodeMember(kind=MemberKind.NODE, regex="^gpu-[0-9]+$"),
        HyperNodeMember(
            kind=MemberKind.NODE,
            labels=LabelSelector(
                match_labels={"rack": "r1"},
                match_expressions=(LabelSelectorRequirement(key="zone", operator="In", values=("a", "b")),),
            ),
        ),
    )
    # what the engine builds from the event is what it builds from the object itself
    assert from_event(event) == msgspec.convert(body, EngineHyperNode)


@pytest.mark.parametrize(
    ("member", "field", "reason"),
    [
        ({"type": "Node", "selector": {}}, "spec.members[1].selector", "exactly one"),
        (
            {"type": "Node", "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}}},
            "spec.members[1].selector",
            "exactly one",
        ),
        ({"type": "Node", "selector": {"exactMatch": {"name": ""}}}, "spec.members[1].selector", "empty"),
        ({"type": "Node", "selector": {"regexMatch": {"pattern": ""}}}, "spec.members[1].selector", "empty"),
        ({"type": "Rack", "selector": {"exactMatch": {"name": "r"}}}, "spec.members[1].type", "'Rack'"),
    ],
)
def test_a_bad_member_is_left_out_and_reported(member: dict[str, Any], field: str, reason: str) -> None:
    body = hypernode_json("tor-1", 1, [("Node", "n1")])
    body["spec"]["members"].append(member)
    event, problems = network.hypernode_event(msgspec.convert(body, HyperNode), 3.0)
    assert event.members == (HyperNodeMember(kind=MemberKind.NODE, name="n1"),)
    assert [p.field for p in problems] == [field] and reason in problems[0].reason


def test_old_hypernode_events_still_decode() -> None:
    raw = b'{"name": "tor", "tier": 1, "members": [{"kind": "node", "name": "n1"}]}'
    event = msgspec.json.decode(raw, type=HyperNodeEvent)
    assert event.members == (HyperNodeMember(kind=MemberKind.NODE, name="n1"),) and event.tier_name == ""


def test_topology_levels_event() -> None:
    event, problems = network.topology_levels_event(topology("default", ["cloud/block", "cloud/rack", HOSTNAME]), 4.0)
    assert (event.name, event.levels, event.deleted, problems) == (
        "default",
        ("cloud/block", "cloud/rack", HOSTNAME),
        False,
        [],
    )
    event, problems = network.topology_levels_event(topology("t", ["cloud/rack", ""]), 4.0)
    assert event.levels == ("cloud/rack",) and [p.field for p in problems] == ["spec.levels[1].nodeLabel"]


def test_a_pod_asking_an_extended_resource_carries_each_containers_requests() -> None:
    from schemas.dra import ContainerRequests

    asking = pod(
        "p",
        init_containers=[container("setup", limits={"nvidia.com/gpu": "1"})],
        containers=[container("main", requests={"cpu": "1"}, limits={"nvidia.com/gpu": "2", "cpu": "2"})],
    )
    event, _ = tr.pending_event(asking, 1.0)
    assert event.containers == (
        ContainerRequests(name="setup", requests={"nvidia.com/gpu": "1"}),
        ContainerRequests(name="main", requests={"nvidia.com/gpu": "2", "cpu": "1"}),  # a request wins over a limit
    )
    plain, _ = tr.pending_event(pod("q", containers=[container("main", requests={"cpu": "1"})]), 1.0)
    assert plain.containers == ()  # nothing a DeviceClass could serve: not carried
