"""Fixtures of the collector node tests."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest


@pytest.fixture
async def kafka_bootstrap_local() -> AsyncIterator[str]:
    """KAFKA_BOOTSTRAP when set, else an embedded broker with the topics created (for this test only)."""
    from topoplace.broker import EmbeddedBroker, ensure_topics

    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        await ensure_topics(external)
        yield external
        return
    broker = EmbeddedBroker()
    bootstrap = await broker.start()
    try:
        await ensure_topics(bootstrap)
        yield bootstrap
    finally:
        await broker.stop()
