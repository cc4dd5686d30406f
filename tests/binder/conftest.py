"""Fixtures of the binder tests: the test API server behind a fault-injecting proxy, a client, pods."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from binder_support import FaultProxy, PodFactory
from kube_clients import client_for
from kubernetes_asyncio import client

from services.binder.cluster_view import ClusterView
from services.binder.ledger import DeviceLedger
from services.binder.service import watch_cluster
from topoplace.kubeapi import KubeApiServer


@pytest.fixture
async def proxy(kube_api: KubeApiServer) -> AsyncIterator[FaultProxy]:
    fault_proxy = FaultProxy(kube_api.url)
    await fault_proxy.start()
    yield fault_proxy
    await fault_proxy.stop()


@pytest.fixture
async def core(proxy: FaultProxy) -> AsyncIterator[client.CoreV1Api]:
    api = client_for(proxy.url)
    yield client.CoreV1Api(api)
    await api.close()


@pytest.fixture
def make_pod(kube_api: KubeApiServer) -> PodFactory:
    """Create a pending pod of ours in the test server; returns the stored object (uid, resourceVersion)."""

    def create(name: str | None = None, namespace: str = "default", node: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": "topoplace",
            "containers": [{"name": "main", "image": "busybox"}],
        }
        if node:
            spec["nodeName"] = node
        body = {
            "metadata": {"name": name or f"pod-{uuid.uuid4().hex[:8]}", "namespace": namespace},
            "spec": spec,
        }
        return kube_api.store.create("pods", body, namespace=namespace)

    return create


class WatchedCluster:
    """The binder's view of the test API server and its ledger, fed by the binder's own watches."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.cluster = ClusterView()
        self.ledger = DeviceLedger(pod_gone=self.cluster.knows_gone)
        self._applied = asyncio.Event()
        self.watches = watch_cluster(core, self.cluster, self.ledger, applied=self._applied.set)
        self._tasks = [asyncio.create_task(w.run()) for w in self.watches]

    async def synced(self) -> None:
        await self.until(lambda: self.cluster.pods_synced and self.cluster.nodes_synced)

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until the watches have applied what makes `condition` true (checked after each change)."""

        async def wait() -> None:
            while not condition():
                self._applied.clear()
                await self._applied.wait()

        await asyncio.wait_for(wait(), 10)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@pytest.fixture
async def watched(kube_client: client.ApiClient) -> AsyncIterator[WatchedCluster]:
    """Watches straight to the test server (not through the proxy, whose log counts the binder's requests)."""
    view = WatchedCluster(client.CoreV1Api(kube_client))
    await view.synced()
    yield view
    await view.stop()


@pytest.fixture
def make_node(kube_api: KubeApiServer) -> Callable[..., dict[str, Any]]:
    def create(name: str, gpus: int) -> dict[str, Any]:
        allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
        body = {"metadata": {"name": name}, "status": {"capacity": allocatable, "allocatable": allocatable}}
        return kube_api.store.create("nodes", body)

    return create
