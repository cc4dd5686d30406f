"""What the chaos run creates in the test API server: the demo cluster, and its gangs."""

from __future__ import annotations

from typing import Any

import aiohttp

from schemas.annotations import SCHEDULER_NAME
from services.collector.cluster.gangs import VOLCANO_GROUP_ANNOTATION
from topoplace.dev.chaos.api_calls import create as _create
from topoplace.dev.demo import cluster as demo_cluster
from topoplace.dev.demo import dra, workload

PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"
RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIM_TEMPLATES = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"


def gang_manifests(count: int, namespace: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """`count` Volcano gangs of 2 to 4 one-GPU members each: (PodGroup, member pods) per gang."""
    gangs = []
    for g in range(count):
        size = 2 + g % 3
        name = f"gang-{g:03d}"
        podgroup = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": size, "queue": "default"},
        }
        members = []
        for m in range(size):
            pod = workload.DemoPod(name=f"{name}-{m}", kind="gang", requests={"nvidia.com/gpu": "1"})
            manifest = workload.pod_manifest(pod, scheduler_name=SCHEDULER_NAME, namespace=namespace)
            manifest["metadata"]["annotations"][VOLCANO_GROUP_ANNOTATION] = name
            members.append(manifest)
        gangs.append((podgroup, members))
    return gangs


async def seed_cluster(session: aiohttp.ClientSession, cluster: demo_cluster.DemoCluster, namespace: str) -> None:
    """The demo cluster's nodes and HyperNodes, and its DRA pool: its slices, and the template its claim pods name."""
    for node in cluster.nodes:
        await _create(session, "/api/v1/nodes", demo_cluster.node_manifest(node))
    for hypernode in demo_cluster.hypernode_manifests(cluster):
        await _create(session, HYPERNODES, hypernode)
    for resource_slice in demo_cluster.slice_manifests(cluster):
        await _create(session, RESOURCE_SLICES, resource_slice)
    template = dra.claim_template(dra.TEMPLATE, namespace)
    await _create(session, CLAIM_TEMPLATES.format(ns=namespace), template)
