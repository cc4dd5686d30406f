"""Host ports, end to end (real broker, test API server, every service): the cluster watcher streams
pending and running pods' hostPorts, and the placer keeps a pod off nodes where one is taken (NodePorts),
by another scheduler's pod or by a replica it has just placed itself."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_cluster import CLUSTER, GPU, NAMESPACE, node_names
from e2e_pipeline import Pipeline

from schemas.annotations import SCHEDULER_NAME
from schemas.events import BindingOutcome
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

HTTP = [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]
PORTS_TAKEN = "node(s) didn't have free ports for the requested pod ports"


def pod(store: ObjectStore, name: str, *, node: str = "") -> str:
    """Ours when `node` is empty, else a pod another scheduler bound there; both take host port 8080."""
    requests = {GPU: "1"}
    container: dict[str, Any] = {"name": "main", "image": "registry.invalid/e2e:latest", "ports": HTTP}
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec |= {"schedulerName": "default-scheduler", "nodeName": node}
    else:
        container["resources"] = {"requests": requests, "limits": requests}
        spec["schedulerName"] = SCHEDULER_NAME
    body = {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    return str(store.create(kube_resources.PODS, body, namespace=NAMESPACE)["metadata"]["uid"])


def bound_nodes(pipeline: Pipeline, uids: list[str]) -> list[str]:
    found = [pipeline.outcomes.bound(uid) for uid in uids]
    assert all(b is not None for b in found), pipeline.outcomes.describe(uids)
    return [b.event.node for b in found if b is not None]


async def test_a_port_another_scheduler_holds_sends_the_pod_to_the_free_node(pipeline: Pipeline, run_id: str) -> None:
    store = pipeline.kube_api.store
    names = sorted(node_names())
    for i, node in enumerate(names[:-1]):
        pod(store, f"{run_id}-theirs-{i}", node=node)
    await pipeline.start_all()
    uid = pod(store, f"{run_id}-web")
    await pipeline.wait_settled([uid], timeout=45)
    assert bound_nodes(pipeline, [uid]) == [names[-1]]


async def test_replicas_with_one_host_port_land_one_per_node_then_none_fits(pipeline: Pipeline, run_id: str) -> None:
    """All submitted at once: each decision sees the ports of the ones before it, bound or only assumed."""
    store = pipeline.kube_api.store
    await pipeline.start_all()
    replicas = [pod(store, f"{run_id}-web-{i}") for i in range(len(CLUSTER.nodes))]
    await pipeline.wait_settled(replicas, timeout=45)
    assert sorted(bound_nodes(pipeline, replicas)) == sorted(node_names())

    extra = pod(store, f"{run_id}-web-extra")
    await pipeline.wait_settled([extra], timeout=30)
    assert pipeline.outcomes.bound(extra) is None
    (refused, *_) = pipeline.outcomes.of(extra, BindingOutcome.UNSCHEDULABLE)
    assert PORTS_TAKEN in refused.event.reason, refused.event.reason
