"""A started test API server and a kubernetes-asyncio client pointed at it by URL only."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubeapi_support import CoreApi, client_for
from kubernetes_asyncio import client

from topoplace.kubeapi import KubeApiServer


@pytest.fixture
async def kube_api() -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
async def kube_client(kube_api: KubeApiServer) -> AsyncIterator[client.ApiClient]:
    api = client_for(kube_api.url)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
def core(kube_client: client.ApiClient) -> CoreApi:
    return client.CoreV1Api(kube_client)
