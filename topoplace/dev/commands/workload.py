"""`topoplace workload seed-cluster|submit`: simulated GPU nodes and a mixed workload for any API server."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from topoplace.commands.options import positive_float, positive_int
from topoplace.config import Settings

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ResourceV1Api

    from topoplace.dev.demo.cluster import DemoCluster


async def _seed(settings: Settings, with_hypernodes: bool, namespace: str) -> int:
    from kubernetes_asyncio import client as k8s

    from topoplace.dev.demo import cluster as demo_cluster
    from topoplace.kube import api_client

    cluster = demo_cluster.default_cluster()
    async with await api_client(settings) as api:
        core = k8s.CoreV1Api(api)
        for node in cluster.nodes:
            await _create(core.create_node, demo_cluster.node_manifest(node))
            print(f"node {node.name} ({node.fixture})")
        if with_hypernodes:
            custom = k8s.CustomObjectsApi(api)
            for hypernode in demo_cluster.hypernode_manifests(cluster):
                await _create(
                    lambda body: custom.create_cluster_custom_object(
                        "topology.volcano.sh", "v1alpha1", "hypernodes", body=body
                    ),
                    hypernode,
                )
        return await _seed_dra_pool(k8s.ResourceV1Api(api), cluster, namespace)


async def _seed_dra_pool(resource: ResourceV1Api, cluster: DemoCluster, namespace: str) -> int:
    """The DRA pool's objects, as `topoplace demo` seeds them: without them its nodes have no GPUs
    and the pods that name the claim template wait for ever."""
    import sys

    from kubernetes_asyncio.client.exceptions import ApiException

    from topoplace.dev.demo import dra_pool

    seed = dra_pool.seed_objects(cluster, namespace)
    try:
        await _create(resource.create_device_class, seed.device_classes[0])
    except ApiException as exc:
        if exc.status != 404:
            raise
        print(
            "topoplace workload: the API server does not serve resource.k8s.io/v1 (DRA, Kubernetes 1.34 or "
            "newer): the DRA pool's nodes have no GPUs",
            file=sys.stderr,
        )
        return 1
    for device_class in seed.device_classes[1:]:
        await _create(resource.create_device_class, device_class)
    for resource_slice in seed.slices:
        await _create(resource.create_resource_slice, resource_slice)
        print(f"resourceslice {resource_slice['metadata']['name']}")
    for template in seed.templates:
        await _create(lambda body: resource.create_namespaced_resource_claim_template(namespace, body=body), template)
        print(f"resourceclaimtemplate {namespace}/{template['metadata']['name']}")
    return 0


async def _create(create: Callable[..., Awaitable[object]], manifest: dict[str, Any]) -> None:
    """Create one object; one already there is left as it is (seeding twice is harmless)."""
    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        await create(body=manifest)
    except ApiException as exc:
        if exc.status != 409:
            raise


async def _submit(settings: Settings, pods: int, seed: int, rate: float, namespace: str) -> int:
    import asyncio

    from kubernetes_asyncio import client as k8s

    from topoplace.dev.demo import workload
    from topoplace.kube import api_client

    async with await api_client(settings) as api:
        core = k8s.CoreV1Api(api)
        for pod in workload.dra_showcase_pods() + workload.generate(pods, seed):
            manifest = workload.pod_manifest(pod, scheduler_name=settings.scheduler_name, namespace=namespace)
            await core.create_namespaced_pod(namespace, body=manifest)  # type: ignore[arg-type]  # dicts are sent as is
            print(f"pod {namespace}/{pod.name}")
            await asyncio.sleep(1.0 / rate)  # pacing the submissions
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("workload", help="create simulated GPU nodes or submit the demo workload")
    sub = parser.add_subparsers(dest="workload_command", required=True)
    seed = sub.add_parser(
        "seed-cluster",
        help="create the demo cluster's nodes and its DRA pool (DeviceClasses, ResourceSlices, claim templates)",
    )
    seed.add_argument("--hypernodes", action="store_true", help="also create Volcano HyperNode objects")
    seed.add_argument("--namespace", default="default", help="where the claim template goes (the pods' namespace)")
    seed.set_defaults(func=lambda a: _run(_seed(Settings.from_env(), a.hypernodes, a.namespace)))
    submit = sub.add_parser("submit", help="submit the mixed demo workload")
    submit.add_argument("--pods", type=positive_int, default=200)
    submit.add_argument("--seed", type=int, default=7)
    submit.add_argument("--rate", type=positive_float, default=20.0, help="pods per second")
    submit.add_argument("--namespace", default="default")
    submit.set_defaults(func=lambda a: _run(_submit(Settings.from_env(), a.pods, a.seed, a.rate, a.namespace)))


def _run(main: Coroutine[Any, Any, int]) -> int:
    import asyncio

    return asyncio.run(main)
