"""The binder holds every binding to the node's allocatable, as kube-scheduler's NodeResourcesFit does:
pods already there (the watch), pods being bound there (assumed), and the pod itself."""

from __future__ import annotations

import asyncio
from typing import Any

from binder_support import FaultProxy, WatchedCluster, placement_for
from binder_support import gpus as topology_gpus
from kubernetes_asyncio import client
from test_binder_watch import NODE, Harness, Message

from schemas.events import BindingOutcome, DeviceAssignment
from services.binder.kube_objects import Container, ObjectMeta, PodObject, PodSpec, ResourceRequirements
from services.binder.node_fit import NodeFit, milli_requests
from topoplace.dev.kubeapi import KubeApiServer

ALLOCATABLE = {"cpu": "8", "memory": "64Gi", "pods": "3", "nvidia.com/gpu": "8"}


def gpus(n: int, cpu: str = "1") -> dict[str, int]:
    return milli_requests({"nvidia.com/gpu": str(n), "cpu": cpu})


def test_pods_on_the_node_and_binds_in_flight_both_count() -> None:
    fit = NodeFit()
    fit.observe("running", "n1", gpus(5), live=True)
    assert fit.shortfall("new", "n1", gpus(3), ALLOCATABLE) is None
    short = fit.shortfall("new", "n1", gpus(4), ALLOCATABLE)
    assert short is not None and short.startswith("Insufficient nvidia.com/gpu on node n1")
    assert "3 of 8 left" in short
    fit.assume("in-flight", "n1", gpus(2))
    assert fit.shortfall("new", "n1", gpus(2), ALLOCATABLE) is not None
    assert fit.shortfall("new", "n2", gpus(8), ALLOCATABLE) is None  # another node: nothing used there
    fit.forget_assumed("in-flight")  # its bind failed
    assert fit.shortfall("new", "n1", gpus(3), ALLOCATABLE) is None


def test_the_pod_count_is_a_resource_too() -> None:
    fit = NodeFit()
    for uid in ("a", "b", "c"):
        fit.observe(uid, "n1", {}, live=True)
    assert fit.shortfall("d", "n1", {}, ALLOCATABLE) == (
        "Insufficient pods on node n1: the pod requests 1, 0 of 3 left by the pods there and being bound there"
    )


def test_a_pod_already_on_the_node_is_not_counted_twice() -> None:
    fit = NodeFit()
    fit.observe("p", "n1", gpus(8), live=True)
    assert fit.shortfall("p", "n1", gpus(8), ALLOCATABLE) is None  # a repeated placement of a bound pod
    fit.assume("p", "n1", gpus(8))  # its hold adds nothing either
    assert fit.shortfall("q", "n1", gpus(1, cpu="0"), ALLOCATABLE) is not None
    fit.observe("p", "n1", gpus(8), live=False)  # finished: frees the node
    assert fit.shortfall("q", "n1", gpus(8), ALLOCATABLE) is None


def test_an_assumption_lasts_until_the_watch_shows_the_pod() -> None:
    fit = NodeFit()
    fit.assume("p", "n1", gpus(8))
    fit.settled_bound("p")  # bound, but the watch has not shown it yet: still counted
    assert fit.shortfall("q", "n1", gpus(1), ALLOCATABLE) is not None
    fit.observe("p", "n1", gpus(8), live=True)  # now counted as bound, once
    assert fit.shortfall("q", "n1", gpus(1), ALLOCATABLE) is not None
    fit.observe("p", "", {}, live=False)  # deleted
    assert fit.shortfall("q", "n1", gpus(8), ALLOCATABLE) is None


def test_a_relist_forgets_pods_it_no_longer_lists() -> None:
    fit = NodeFit()
    fit.observe("gone", "n1", gpus(8), live=True)
    fit.assume("gone-too", "n1", gpus(1))
    fit.forget_missing(["other"])
    assert fit.shortfall("q", "n1", gpus(8), ALLOCATABLE) is None


def test_resources_the_node_does_not_list_are_not_judged_here() -> None:
    fit = NodeFit()
    assert fit.shortfall("p", "n1", milli_requests({"example.com/fpga": "4"}), ALLOCATABLE) is None


def test_a_pods_effective_request_counts_init_containers_sidecars_and_overhead() -> None:
    def container(cpu: str, restart: str | None = None) -> Container:
        return Container(resources=ResourceRequirements(requests={"cpu": cpu}), restart_policy=restart)

    pod = PodObject(
        metadata=ObjectMeta(uid="u"),
        spec=PodSpec(
            containers=[container("1"), container("500m")],
            init_containers=[container("4"), container("250m", "Always")],
            overhead={"cpu": "100m"},
        ),
    )
    # max(1.5 + 0.25 sidecar, 4 init) + 0.1 overhead
    assert pod.view().requests == {"cpu": 4100}


async def test_two_placers_giving_away_the_same_cpus_are_caught_before_the_binding(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, watched: WatchedCluster
) -> None:
    kube_api.store.create(
        "nodes",
        {"metadata": {"name": NODE}, "status": {"allocatable": {"pods": "110", "cpu": "8", "nvidia.com/gpu": "4"}}},
    )

    def pod(name: str) -> dict[str, Any]:
        body = {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "schedulerName": "topoplace",
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "6", "nvidia.com/gpu": "1"}}}
                ],
            },
        }
        created: dict[str, Any] = kube_api.store.create("pods", body, namespace="default")
        return created

    first, second = pod("first"), pod("second")
    uids = (first["metadata"]["uid"], second["metadata"]["uid"])
    await watched.until(
        lambda: watched.cluster.allocatable(NODE) is not None and all(watched.cluster.pod(u) for u in uids)
    )
    watched.ledger.set_node_devices(NODE, topology_gpus(4))
    harness = Harness(core, watched)
    # Each placer saw the node's 8 CPUs free and gave 6 of them away.
    await asyncio.gather(
        harness.handler(Message(event=placement_for(first, NODE, (DeviceAssignment(index=0),)))),
        harness.handler(Message(event=placement_for(second, NODE, (DeviceAssignment(index=1),)))),
    )
    outcomes = {sent.event.name: sent.event for sent in harness.producer.sent}
    assert outcomes["first"].outcome is BindingOutcome.BOUND  # in flight while the second was checked
    assert outcomes["second"].outcome is BindingOutcome.CONFLICT
    assert "Insufficient cpu" in outcomes["second"].reason
    assert len([c for c in proxy.calls("POST", "/binding") if c.status == 201]) == 1


def test_the_binder_counts_amounts_as_the_placer_engine_and_kube_scheduler_round_them() -> None:
    from engine.decide.kube.resources import parse_requests

    quantities = {"cpu": "0.5m", "memory": "1.5", "nvidia.com/gpu": "2", "ephemeral-storage": "1Gi"}
    assert milli_requests(quantities) == parse_requests(quantities, "requests")
    assert milli_requests(quantities)["cpu"] == 1 and milli_requests(quantities)["memory"] == 2000  # rounded up
