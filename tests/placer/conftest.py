"""Fixtures of the placer's tests: a fresh embedded broker per test that needs one.

A fresh broker (it starts in well under a second) keeps every test's topics
empty: a placer replays its topics from offset 0, so events left by another
test would otherwise become part of its view.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from topoplace.broker import EmbeddedBroker, ensure_topics


@pytest.fixture
async def broker() -> AsyncIterator[str]:
    async with EmbeddedBroker() as embedded:
        await ensure_topics(embedded.bootstrap)
        yield embedded.bootstrap
