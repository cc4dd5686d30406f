"""`topoplace workload seed-cluster|submit`: simulated GPU nodes and a mixed workload for any API server."""

from __future__ import annotations

import argparse
from collections.abc import Coroutine
from typing import Any

from topoplace.commands.options import positive_float, positive_int
from topoplace.config import Settings


async def _seed(settings: Settings, with_hypernodes: bool) -> int:
    from kubernetes_asyncio import client as k8s
    from kubernetes_asyncio.client.exceptions import ApiException

    from topoplace.dev.demo import cluster as demo_cluster
    from topoplace.kube import api_client

    cluster = demo_cluster.default_cluster()
    async with await api_client(settings) as api:
        core = k8s.CoreV1Api(api)
        for node in cluster.nodes:
            try:
                await core.create_node(body=demo_cluster.node_manifest(node))  # type: ignore[arg-type]  # plain dicts are sent as they are
            except ApiException as exc:
                if exc.status != 409:  # already there: seeding twice is harmless
                    raise
            print(f"node {node.name} ({node.fixture})")
        if with_hypernodes:
            custom = k8s.CustomObjectsApi(api)
            for hypernode in demo_cluster.hypernode_manifests(cluster):
                try:
                    await custom.create_cluster_custom_object(
                        "topology.volcano.sh", "v1alpha1", "hypernodes", body=hypernode
                    )
                except ApiException as exc:
                    if exc.status != 409:
                        raise
    return 0


async def _submit(settings: Settings, pods: int, seed: int, rate: float, namespace: str) -> int:
    import asyncio

    from kubernetes_asyncio import client as k8s

    from topoplace.dev.demo import workload
    from topoplace.kube import api_client

    async with await api_client(settings) as api:
        core = k8s.CoreV1Api(api)
        for pod in workload.generate(pods, seed):
            manifest = workload.pod_manifest(pod, scheduler_name=settings.scheduler_name, namespace=namespace)
            await core.create_namespaced_pod(namespace, body=manifest)  # type: ignore[arg-type]  # dicts are sent as is
            print(f"pod {namespace}/{pod.name}")
            await asyncio.sleep(1.0 / rate)  # pacing the submissions
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("workload", help="create simulated GPU nodes or submit the demo workload")
    sub = parser.add_subparsers(dest="workload_command", required=True)
    seed = sub.add_parser("seed-cluster", help="create the demo cluster's nodes in the API server")
    seed.add_argument("--hypernodes", action="store_true", help="also create Volcano HyperNode objects")
    seed.set_defaults(func=lambda a: _run(_seed(Settings.from_env(), a.hypernodes)))
    submit = sub.add_parser("submit", help="submit the mixed demo workload")
    submit.add_argument("--pods", type=positive_int, default=200)
    submit.add_argument("--seed", type=int, default=7)
    submit.add_argument("--rate", type=positive_float, default=20.0, help="pods per second")
    submit.add_argument("--namespace", default="default")
    submit.set_defaults(func=lambda a: _run(_submit(Settings.from_env(), a.pods, a.seed, a.rate, a.namespace)))


def _run(main: Coroutine[Any, Any, int]) -> int:
    import asyncio

    return asyncio.run(main)
