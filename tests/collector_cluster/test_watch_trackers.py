"""What the watcher publishes for each change, and what it keeps quiet about."""

from __future__ import annotations

from cluster_objects import container, hypernode, node, pod, topology
from decision_keys import TEST_KEY

from schemas import annotations as pod_annotations
from schemas import topics
from schemas.events import (
    DeviceAssignment,
    HyperNodeEvent,
    LifecyclePhase,
    PendingPodEvent,
    PodLifecycleEvent,
    TopologyLevelsEvent,
)
from schemas.seal import SEAL
from services.collector.cluster.trackers import PodTracker, hypernode_tracker, node_tracker, topology_tracker

DEVICES = {
    pod_annotations.DEVICES: '[{"index": 1}]',
    pod_annotations.NODE: "gpu-1",
    SEAL: TEST_KEY.seal("uid-default-p", "gpu-1", "d-1", (DeviceAssignment(index=1),)),
}


def test_a_pending_pod_is_published_once_then_again_on_resync() -> None:
    tracker = PodTracker("topoplace")
    first = tracker.observe(pod("p"), 1.0)
    assert [(p.topic, p.key) for p in first.publications] == [(topics.PODS_PENDING.name, "uid-default-p")]
    assert isinstance(first.publications[0].event, PendingPodEvent)
    # the binder annotating the pod before it binds must not re-publish it
    assert tracker.observe(pod("p", annotations={"x": "y"}), 2.0).publications == []
    assert len(tracker.relisted([pod("p")], 3.0, force=True).publications) == 1
    assert tracker.relisted([pod("p")], 4.0).publications == []


def test_pending_pods_of_other_schedulers_are_ignored_their_bound_pods_reported() -> None:
    tracker = PodTracker("topoplace")
    assert tracker.observe(pod("p", scheduler="default-scheduler"), 1.0).publications == []
    assert len(tracker) == 0  # nothing kept of another scheduler's pending pod
    out = tracker.observe(pod("q", scheduler="default-scheduler", node="n", phase="Running"), 2.0).publications
    assert [(p.topic, p.key) for p in out] == [(topics.PODS_LIFECYCLE.name, "uid-default-q")]
    event = out[0].event
    assert isinstance(event, PodLifecycleEvent)
    assert (event.phase, event.node, event.ours, event.requests) == (
        LifecyclePhase.BOUND,
        "n",
        False,
        {"nvidia.com/gpu": "1"},
    )
    assert tracker.observe(pod("q", scheduler="default-scheduler", node="n", phase="Running"), 3.0).publications == []
    deleted = tracker.gone("uid-default-q", 4.0).publications
    assert isinstance(deleted[0].event, PodLifecycleEvent)
    assert (deleted[0].event.phase, deleted[0].event.node, deleted[0].event.ours) == (
        LifecyclePhase.DELETED,
        "n",
        False,
    )


def test_a_gated_pod_is_not_pending_until_its_gates_are_gone() -> None:
    tracker = PodTracker("topoplace")
    gated = pod("p", spec_extra={"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]})
    assert tracker.observe(gated, 1.0).publications == []
    out = tracker.observe(pod("p"), 2.0).publications
    assert [(p.topic, p.key) for p in out] == [(topics.PODS_PENDING.name, "uid-default-p")]


def test_a_changed_request_of_a_bound_pod_is_published_again() -> None:
    # in-place resize changes what the pod holds on its node
    tracker = PodTracker("topoplace")
    small = [container("a", requests={"cpu": "1"})]
    big = [container("a", requests={"cpu": "2"})]
    assert len(tracker.observe(pod("p", node="n", containers=small), 1.0).publications) == 1
    assert tracker.observe(pod("p", node="n", containers=small), 2.0).publications == []
    out = tracker.observe(pod("p", node="n", containers=big), 3.0).publications
    assert [p.event.requests for p in out if isinstance(p.event, PodLifecycleEvent)] == [{"cpu": "2"}]


def test_binding_then_deletion() -> None:
    tracker = PodTracker("topoplace", TEST_KEY)
    tracker.observe(pod("p"), 1.0)
    bound = tracker.observe(pod("p", node="gpu-1", annotations=DEVICES, phase="Running"), 2.0).publications
    assert [(p.topic, p.key) for p in bound] == [(topics.PODS_LIFECYCLE.name, "uid-default-p")]
    event = bound[0].event
    assert isinstance(event, PodLifecycleEvent) and event.phase is LifecyclePhase.BOUND and event.devices[0].index == 1
    # a status change of the running pod publishes nothing new
    assert tracker.observe(pod("p", node="gpu-1", annotations=DEVICES, phase="Running"), 3.0).publications == []
    deleted = tracker.gone("uid-default-p", 4.0).publications
    assert isinstance(deleted[0].event, PodLifecycleEvent)
    assert deleted[0].event.phase is LifecyclePhase.DELETED and deleted[0].event.node == "gpu-1"
    assert tracker.gone("uid-default-p", 5.0).publications == []


def test_a_finished_pod_frees_its_devices() -> None:
    tracker = PodTracker("topoplace")
    tracker.observe(pod("p", node="gpu-1", annotations=DEVICES), 1.0)
    out = tracker.observe(pod("p", node="gpu-1", annotations=DEVICES, phase="Succeeded"), 2.0).publications
    assert [p.event.phase for p in out if isinstance(p.event, PodLifecycleEvent)] == [LifecyclePhase.DELETED]


def test_a_deleted_pending_pod_is_reported_deleted() -> None:
    tracker = PodTracker("topoplace")
    tracker.observe(pod("p"), 1.0)
    out = tracker.gone("uid-default-p", 2.0).publications
    assert (
        isinstance(out[0].event, PodLifecycleEvent)
        and out[0].event.phase is LifecyclePhase.DELETED
        and out[0].event.node == ""
    )


def test_relist_reports_pods_that_vanished_meanwhile() -> None:
    tracker = PodTracker("topoplace")
    tracker.observe(pod("a"), 1.0)
    tracker.observe(pod("b", node="gpu-1"), 1.0)
    out = tracker.relisted([pod("b", node="gpu-1"), pod("c")], 2.0).publications
    kinds = sorted((p.key, type(p.event).__name__, getattr(p.event, "phase", None)) for p in out)
    assert kinds == [
        ("uid-default-a", "PodLifecycleEvent", LifecyclePhase.DELETED),
        ("uid-default-c", "PendingPodEvent", None),
    ]


def test_seeded_bound_pods_missing_at_the_first_list_are_deleted() -> None:
    tracker = PodTracker("topoplace")
    tracker.seed([PodLifecycleEvent(uid="old", namespace="ns", name="gone", phase=LifecyclePhase.BOUND, node="gpu-9")])
    out = tracker.relisted([], 1.0).publications
    assert isinstance(out[0].event, PodLifecycleEvent)
    assert (out[0].key, out[0].event.phase, out[0].event.node) == ("old", LifecyclePhase.DELETED, "gpu-9")


def test_node_changes_that_matter_and_those_that_do_not() -> None:
    tracker = node_tracker()
    assert len(tracker.observe(node("n"), 1.0).publications) == 1
    heartbeat = node("n")
    heartbeat.metadata.resource_version = "99"
    assert tracker.observe(heartbeat, 2.0).publications == []
    assert len(tracker.observe(node("n", unschedulable=True), 3.0).publications) == 1
    gone = tracker.relisted([], 4.0).publications
    assert [(p.key, p.event.deleted) for p in gone] == [("n", True)]  # type: ignore[union-attr]


def test_topology_deletion_is_an_event_then_a_tombstone() -> None:
    tracker = topology_tracker()
    first = tracker.observe(topology("default", ["cloud/rack", "kubernetes.io/hostname"]), 1.0).publications
    assert [(p.topic, p.key) for p in first] == [(topics.TOPOLOGY_LEVELS.name, "default")]
    assert tracker.observe(topology("default", ["cloud/rack", "kubernetes.io/hostname"]), 2.0).publications == []
    assert len(tracker.relisted([topology("default", ["cloud/rack"])], 3.0).publications) == 1
    out = tracker.relisted([], 4.0).publications
    assert [(p.topic, p.key) for p in out] == [(topics.TOPOLOGY_LEVELS.name, "default")] * 2
    assert isinstance(out[0].event, TopologyLevelsEvent) and out[0].event.deleted and out[1].event is None


def test_hypernode_deletion_is_an_event_then_a_tombstone() -> None:
    tracker = hypernode_tracker()
    tracker.observe(hypernode("tor", 1, [("Node", "n1")]), 1.0)
    assert tracker.observe(hypernode("tor", 1, [("Node", "n1")]), 2.0).publications == []
    changed = tracker.observe(hypernode("tor", 1, [("Node", "n1"), ("Node", "n2")]), 3.0).publications
    assert len(changed) == 1
    out = tracker.gone("tor", 4.0).publications
    assert [(p.topic, p.key) for p in out] == [(topics.TOPOLOGY_NETWORK.name, "tor")] * 2
    assert isinstance(out[0].event, HyperNodeEvent) and out[0].event.deleted and out[0].event.tier == 1
    assert out[1].event is None


def test_a_resync_republishes_unchanged_nodes_and_hypernodes() -> None:
    # A broker that lost nodes.status or topology.network gets them back at the next resync.
    nodes, network = node_tracker(), hypernode_tracker()
    nodes.relisted([node("n")], 1.0)
    network.relisted([hypernode("tor", 1, [("Node", "n")])], 1.0)
    assert nodes.relisted([node("n")], 2.0).publications == []
    assert network.relisted([hypernode("tor", 1, [("Node", "n")])], 2.0).publications == []
    again = nodes.relisted([node("n")], 3.0, force=True).publications
    assert [(p.topic, p.key) for p in again] == [(topics.NODES_STATUS.name, "n")]
    again = network.relisted([hypernode("tor", 1, [("Node", "n")])], 3.0, force=True).publications
    assert [(p.topic, p.key) for p in again] == [(topics.TOPOLOGY_NETWORK.name, "tor")]


def test_a_relist_tombstones_bound_records_on_the_topic_it_did_not_list() -> None:
    """The watcher is the only writer of pods.lifecycle: a "bound" it did not list is forged or stale."""
    tracker = PodTracker("topoplace", TEST_KEY)
    listed = pod("p", node="gpu-1", annotations=DEVICES, phase="Running")
    tracker.observe(listed, 1.0)
    forged = PodLifecycleEvent(
        uid="never-existed", namespace="default", name="x", phase=LifecyclePhase.BOUND, node="gpu-1"
    )
    tracker.on_topic("never-existed", forged)
    tracker.on_topic("uid-default-p", forged)  # read back: our own record of a listed pod
    deleted = PodLifecycleEvent(uid="gone", namespace="default", name="g", phase=LifecyclePhase.DELETED)
    tracker.on_topic("gone", deleted)  # a deletion stays on the topic as it is

    out = tracker.relisted([listed], 2.0).publications
    assert [(p.topic, p.key, p.event) for p in out] == [(topics.PODS_LIFECYCLE.name, "never-existed", None)]
    assert tracker.relisted([listed], 3.0).publications == []  # once
