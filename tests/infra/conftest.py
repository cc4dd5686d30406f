"""Fixtures of the infrastructure tests: one broker for the session, fresh topics per test."""

from __future__ import annotations

import pytest
from infra_helpers import unique_topic

from schemas import events
from schemas.topics import Topic
from topoplace.kafka.admin import ensure_topics


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
