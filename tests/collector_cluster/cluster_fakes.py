"""A publisher that records instead of producing, and a client pointed at the test server by URL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from schemas.topics import Topic

# kubernetes-asyncio's type stubs want model objects; the tests send plain dicts, as its users do.
CoreApi = Any
CustomApi = Any


class Sent(msgspec.Struct, frozen=True):
    topic: str
    key: str | None
    event: msgspec.Struct | None


class RecordingPublisher:
    """Stands in for EventProducer: keeps what was sent and lets a test wait for it."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._changed = asyncio.Condition()

    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None:
        name = topic if isinstance(topic, str) else topic.name
        async with self._changed:
            self.sent.append(Sent(name, key, event))
            self._changed.notify_all()

    def matching(self, predicate: Callable[[Sent], bool]) -> list[Sent]:
        return [s for s in self.sent if predicate(s)]

    async def wait_for(self, predicate: Callable[[Sent], bool], count: int = 1, timeout: float = 5.0) -> list[Sent]:
        async def enough() -> list[Sent]:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.matching(predicate)) >= count)
                return self.matching(predicate)

        return await asyncio.wait_for(enough(), timeout)
