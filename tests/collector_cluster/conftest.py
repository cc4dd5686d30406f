"""A test API server, a client on it, a recording publisher and (for the end-to-end tests) a broker."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest
from cluster_fakes import RecordingPublisher, client_for
from kubernetes_asyncio import client

from topoplace.broker import EmbeddedBroker, ensure_topics
from topoplace.kubeapi import KubeApiServer


@pytest.fixture
async def kube_api() -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(bookmark_interval=0.5) as server:
        yield server


@pytest.fixture
async def kube_client(kube_api: KubeApiServer) -> AsyncIterator[client.ApiClient]:
    api = client_for(kube_api.url)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """KAFKA_BOOTSTRAP when set, else an embedded broker (a subprocess, so it outlives per-test loops)."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        asyncio.run(ensure_topics(external))
        yield external
        return
    broker = EmbeddedBroker()
    bootstrap = asyncio.run(broker.start())
    try:
        asyncio.run(ensure_topics(bootstrap))
        yield bootstrap
    finally:
        asyncio.run(broker.stop())
