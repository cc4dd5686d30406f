"""Fixtures every test folder shares: a broker for the session, a fresh broker, the test API server."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest
from kube_clients import client_for
from kubernetes_asyncio import client

from topoplace.dev.broker import EmbeddedBroker
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.admin import ensure_topics


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """KAFKA_BOOTSTRAP when set, else one embedded broker for the session, with every topic created.

    Synchronous: the broker is a subprocess that outlives the per-test event loops.
    Tests sharing it keep apart by their own keys, pods and consumer groups.
    """
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


@pytest.fixture
async def fresh_broker() -> AsyncIterator[str]:
    """An embedded broker of this test alone (it starts in well under a second), topics empty.

    For services that replay their topics from offset 0 (the placer, the node agent's
    compacted topics), where another test's events would become part of what they see.
    """
    async with EmbeddedBroker() as embedded:
        await ensure_topics(embedded.bootstrap)
        yield embedded.bootstrap


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
