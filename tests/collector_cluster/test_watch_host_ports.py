"""Pods' host ports go on pods.pending and pods.lifecycle, as kube-scheduler's NodePorts reads them:
containers' and sidecars' ports with a hostPort, (hostIP, protocol, hostPort), empty protocol TCP.

Before, neither event carried them, so the live placer could not keep a pod off a node whose port is taken."""

from __future__ import annotations

from typing import Any

from cluster_objects import pod

from schemas.kube import HostPort
from services.collector.cluster import translate as tr


def _container(name: str, *ports: dict[str, Any], restart_policy: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "image": "busybox", "ports": list(ports)}
    if restart_policy is not None:
        found["restartPolicy"] = restart_policy
    return found


WEB = _container(
    "web",
    {"containerPort": 80, "hostPort": 8080},
    {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "10.0.0.1"},
    {"containerPort": 9090},  # a container port only: no host port
)
SIDECAR = _container("proxy", {"containerPort": 15001, "hostPort": 15001}, restart_policy="Always")
INIT = _container("setup", {"containerPort": 7000, "hostPort": 7000})  # runs to completion: holds no port


def test_a_pending_pod_carries_its_containers_and_sidecars_host_ports() -> None:
    event, problems = tr.pending_event(pod("p", containers=[WEB], init_containers=[INIT, SIDECAR]), 1.0)
    assert problems == []
    assert event.host_ports == (
        HostPort(port=15001, host_ip=""),  # an empty hostIP: every address (NodePorts reads it so)
        HostPort(port=8080, host_ip=""),
        HostPort(port=5353, protocol="UDP", host_ip="10.0.0.1"),
    )


def test_a_running_pod_of_any_scheduler_carries_the_host_ports_it_takes() -> None:
    running = pod("p", scheduler="default-scheduler", node="n1", containers=[WEB])
    event, problems = tr.bound_event(running, 1.0, ours=False)
    assert problems == []
    assert [(p.host_ip, p.protocol, p.port) for p in event.host_ports] == [
        ("", "TCP", 8080),
        ("10.0.0.1", "UDP", 5353),
    ]


def test_a_bad_host_port_is_left_out_and_reported_and_the_rest_goes() -> None:
    bad = _container("web", {"containerPort": 80, "hostPort": 70000}, {"containerPort": 81, "hostPort": 8081})
    event, problems = tr.pending_event(pod("p", containers=[bad]), 1.0)
    assert event.host_ports == (HostPort(port=8081, host_ip=""),)
    assert [(p.field, "between 1 and 65535" in p.reason) for p in problems] == [("spec.containers[0].ports[0]", True)]


def test_a_pod_without_host_ports_carries_none() -> None:
    event, _ = tr.pending_event(pod("p"), 1.0)
    assert event.host_ports == ()
