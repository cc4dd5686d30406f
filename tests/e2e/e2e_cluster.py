"""The end-to-end tests' cluster and pods: real machine types under a two-level network tree.

Node names stay the same in every test: the topics outlive a test, so a node
seen by an earlier test is the same node in this one.
"""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.annotations import SCHEDULER_NAME
from services.collector.node.fleet import Fleet, FleetMember
from topoplace.dev.demo.cluster import DemoCluster, DemoNode, hypernode_manifests, node_manifest, topology_of
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

NAMESPACE = "default"
GPU = "nvidia.com/gpu"

# 3 × DGX H100 (NVSwitch) and 2 × DGX-1 V100 (hybrid cube-mesh): 40 GPUs on 2 ToRs under one spine.
CLUSTER = DemoCluster(
    nodes=(
        DemoNode(name="e2e-dgx-h100-0", fixture="dgx-h100", tor="e2e-tor-0"),
        DemoNode(name="e2e-dgx-h100-1", fixture="dgx-h100", tor="e2e-tor-0"),
        DemoNode(name="e2e-dgx1-v100-0", fixture="dgx1-v100", tor="e2e-tor-0"),
        DemoNode(name="e2e-dgx-h100-2", fixture="dgx-h100", tor="e2e-tor-1"),
        DemoNode(name="e2e-dgx1-v100-1", fixture="dgx1-v100", tor="e2e-tor-1"),
    ),
    spines={"e2e-spine-0": ("e2e-tor-0", "e2e-tor-1")},
)


class PodSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    gpus: int


def node_names(cluster: DemoCluster = CLUSTER) -> set[str]:
    return {node.name for node in cluster.nodes}


def gpus_per_node(cluster: DemoCluster = CLUSTER) -> dict[str, int]:
    return {node.name: len(topology_of(node).devices) for node in cluster.nodes}


def fleet(cluster: DemoCluster = CLUSTER) -> Fleet:
    return Fleet(members=tuple(FleetMember(node=n.name, source=n.fixture) for n in cluster.nodes))


def seed_cluster(store: ObjectStore, cluster: DemoCluster = CLUSTER) -> None:
    for node in cluster.nodes:
        store.create(kube_resources.NODES, node_manifest(node))
    for hypernode in hypernode_manifests(cluster):
        store.create(kube_resources.HYPERNODES, hypernode)


def pod_manifest(pod: PodSpec, *, scheduler_name: str = SCHEDULER_NAME) -> dict[str, Any]:
    requests = {GPU: str(pod.gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": NAMESPACE, "labels": {"app": "topoplace-e2e"}},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/e2e:latest",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
        },
    }


def create_pod(store: ObjectStore, pod: PodSpec) -> str:
    """Submit a pending pod of ours; returns its uid."""
    created = store.create(kube_resources.PODS, pod_manifest(pod), namespace=NAMESPACE)
    return str(created["metadata"]["uid"])


def pods_by_uid(store: ObjectStore) -> dict[str, dict[str, Any]]:
    items, _ = store.list(kube_resources.PODS, NAMESPACE)
    return {str(p["metadata"]["uid"]): p for p in items}


def pod_changes(store: ObjectStore) -> list[Any]:
    """The API server's change log of pods, from the start (it keeps the last 10,000 changes)."""
    changes, subscription = store.subscribe(kube_resources.PODS, NAMESPACE, since=0)
    store.unsubscribe(subscription)
    return changes


def events_about(store: ObjectStore, uid: str) -> list[dict[str, Any]]:
    """Core/v1 Events whose involvedObject is the pod."""
    items, _ = store.list(kube_resources.CORE_EVENTS, NAMESPACE)
    return [e for e in items if (e.get("involvedObject") or {}).get("uid") == uid]
