"""Fixtures of the binder tests: the test API server behind a fault-injecting proxy, a client, pods."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from binder_support import FaultProxy, PodFactory, WatchedCluster
from kube_clients import client_for
from kubernetes_asyncio import client

from topoplace.dev.kubeapi import KubeApiServer


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
