"""Fixtures of the infrastructure tests: one broker for the session, fresh topics per test."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
from infra_helpers import unique_topic

from schemas import events
from schemas.topics import Topic
from topoplace.broker import EmbeddedBroker, ensure_topics


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """KAFKA_BOOTSTRAP when set, else an embedded broker, with every topic created.

    Synchronous on purpose: the broker is a plain subprocess, so it outlives the
    per-test event loops.
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
async def pending_topic(kafka_bootstrap: str) -> Topic:
    topic = unique_topic(events.PendingPodEvent)
    await ensure_topics(kafka_bootstrap, [topic])
    return topic


@pytest.fixture
async def compacted_topic(kafka_bootstrap: str) -> Topic:
    topic = unique_topic(events.NodeStatusEvent, compacted=True, partitions=2)
    await ensure_topics(kafka_bootstrap, [topic])
    return topic
