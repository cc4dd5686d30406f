"""The live placer applies NodePorts as `engine place --cluster` does: a pod is kept off a node where one
of its host ports is taken by a running pod (of any scheduler) or by a pod it has just placed there, with
kube-scheduler's reason when no node is left.

Before, neither pods.pending nor pods.lifecycle carried host ports, and the placer's node states held none:
the first node by name was chosen whatever ports it had taken."""

from __future__ import annotations

from placer_builders import status, topology

from schemas.events import LifecyclePhase, PendingPodEvent, PlacementEvent, PlacementOutcome, PodLifecycleEvent
from schemas.kube import HostPort
from services.placer.decide import Decider

ALLOCATABLE = {"cpu": "8", "memory": "32Gi", "pods": "110"}
PORTS_TAKEN = "node(s) didn't have free ports for the requested pod ports"
HTTP = (HostPort(port=8080, host_ip=""),)


def cluster(*nodes: str) -> Decider:
    decider = Decider()
    for node in nodes:
        decider.on_event(topology(node, 0))
        decider.on_event(status(node, allocatable=ALLOCATABLE))
    return decider


def web(uid: str, ports: tuple[HostPort, ...] = HTTP) -> PendingPodEvent:
    return PendingPodEvent(
        uid=uid, namespace="default", name=uid, resource_version="1", requests={"cpu": "1"}, host_ports=ports
    )


def running(uid: str, node: str, ports: tuple[HostPort, ...]) -> PodLifecycleEvent:
    return PodLifecycleEvent(
        uid=uid,
        namespace="default",
        name=uid,
        phase=LifecyclePhase.BOUND,
        node=node,
        requests={"cpu": "1"},
        ours=False,
        host_ports=ports,
    )


def decided(decider: Decider, pod: PendingPodEvent) -> PlacementEvent:
    placement = decider.on_pending(pod).placement
    assert placement is not None
    return placement


def test_a_port_taken_by_a_running_pod_moves_the_pod_to_another_node() -> None:
    decider = cluster("a", "b")
    assert decided(cluster("a", "b"), web("p")).node == "a"  # the first by name, ports aside
    decider.on_event(running("other", "a", HTTP))
    placement = decided(decider, web("p"))
    assert placement.outcome is PlacementOutcome.PLACED and placement.node == "b"


def test_a_port_on_another_address_or_protocol_is_no_conflict() -> None:
    decider = cluster("a")
    decider.on_event(running("dns", "a", (HostPort(port=8080, protocol="UDP", host_ip=""),)))
    decider.on_event(running("pinned", "a", (HostPort(port=8081, host_ip="10.0.0.1"),)))
    assert decided(decider, web("p", (HostPort(port=8081, host_ip="10.0.0.2"),))).node == "a"
    assert decided(decider, web("q")).node == "a"


def test_with_every_port_taken_the_pod_is_unschedulable_with_kubes_reason() -> None:
    decider = cluster("a", "b")
    decider.on_event(running("x", "a", HTTP))
    decider.on_event(running("y", "b", HTTP))
    placement = decided(decider, web("p"))
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert f"0/2 nodes are available: 2 {PORTS_TAKEN}." in placement.reason


def test_a_pod_just_placed_holds_its_port_before_the_cluster_reports_it() -> None:
    decider = cluster("a", "b")
    first = decided(decider, web("p1"))
    assert first.host_ports == HTTP  # carried on the decision, so every replica counts it while assumed
    assert decided(decider, web("p2")).node != first.node


def test_a_deleted_pod_frees_its_port() -> None:
    decider = cluster("a")
    decider.on_event(running("x", "a", HTTP))
    assert decided(decider, web("p")).outcome is PlacementOutcome.UNSCHEDULABLE
    decider.on_event(PodLifecycleEvent(uid="x", namespace="default", name="x", phase=LifecyclePhase.DELETED, node="a"))
    assert decided(decider, web("p2")).node == "a"
