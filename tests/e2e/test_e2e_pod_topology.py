"""Inter-pod affinity and topology spread, end to end (real broker, test API server, every service):
what the cluster watcher streams (pending pods' terms, every scheduler's bound pods' labels and terms,
namespaces, the workloads' selectors) is what the placer decides by."""

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

HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def our_pod(store: ObjectStore, name: str, labels: dict[str, str], **spec: Any) -> str:
    requests = {GPU: "1"}
    body = {
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/e2e:latest",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
            **spec,
        },
    }
    return str(store.create(kube_resources.PODS, body, namespace=NAMESPACE)["metadata"]["uid"])


def their_pod(store: ObjectStore, name: str, node: str, labels: dict[str, str]) -> None:
    """A pod another scheduler placed: bound to the node, not ours."""
    body = {
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": node,
            "containers": [{"name": "main", "image": "registry.invalid/cache:latest"}],
        },
    }
    store.create(kube_resources.PODS, body, namespace=NAMESPACE)


def required_anti(labels: dict[str, str], key: str = HOSTNAME) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def bound_nodes(pipeline: Pipeline, uids: list[str]) -> list[str]:
    found = [pipeline.outcomes.bound(uid) for uid in uids]
    assert all(b is not None for b in found), pipeline.outcomes.describe(uids)
    return [b.event.node for b in found if b is not None]


async def test_replicas_with_required_anti_affinity_land_one_per_node(pipeline: Pipeline, run_id: str) -> None:
    """A Deployment-like set, all submitted at once: each decision sees the ones before it, bound or not."""
    store = pipeline.kube_api.store
    app = {"app": f"{run_id}-web"}
    await pipeline.start_all()
    replicas = [
        our_pod(store, f"{run_id}-web-{i}", app, affinity=required_anti(app)) for i in range(len(CLUSTER.nodes))
    ]
    await pipeline.wait_settled(replicas, timeout=45)
    assert sorted(bound_nodes(pipeline, replicas)) == sorted(node_names())

    extra = our_pod(store, f"{run_id}-web-extra", app, affinity=required_anti(app))
    await pipeline.wait_settled([extra], timeout=30)
    assert pipeline.outcomes.bound(extra) is None
    (refused, *_) = pipeline.outcomes.of(extra, BindingOutcome.UNSCHEDULABLE)
    assert "didn't match pod anti-affinity rules" in refused.event.reason, refused.event.reason


async def test_a_zone_spread_constraint_lands_in_the_emptier_zone(pipeline: Pipeline, run_id: str) -> None:
    store = pipeline.kube_api.store
    zones = {n.name: ("za" if n.tor == "e2e-tor-0" else "zb") for n in CLUSTER.nodes}
    for name, zone in zones.items():
        node = store.get(kube_resources.NODES, name)
        node["metadata"]["labels"][ZONE] = zone
        store.replace(kube_resources.NODES, name, node)
    app = {"app": f"{run_id}-spread"}
    za = sorted(n for n, z in zones.items() if z == "za")
    for i, node_name in enumerate(za[:2]):
        their_pod(store, f"{run_id}-theirs-{i}", node_name, app)
    await pipeline.start_all()
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": app},
    }
    uid = our_pod(store, f"{run_id}-spread-0", app, topologySpreadConstraints=[spread])
    await pipeline.wait_settled([uid], timeout=45)
    (node,) = bound_nodes(pipeline, [uid])
    assert zones[node] == "zb"


async def test_required_anti_affinity_avoids_another_schedulers_pods(pipeline: Pipeline, run_id: str) -> None:
    store = pipeline.kube_api.store
    cache = {"app": f"{run_id}-cache"}
    names = sorted(node_names())
    free = names[-1]
    for i, node_name in enumerate(names[:-1]):
        their_pod(store, f"{run_id}-cache-{i}", node_name, cache)
    await pipeline.start_all()
    uid = our_pod(store, f"{run_id}-apart", {"app": f"{run_id}-apart"}, affinity=required_anti(cache))
    await pipeline.wait_settled([uid], timeout=45)
    assert bound_nodes(pipeline, [uid]) == [free]
