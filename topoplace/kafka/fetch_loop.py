"""The run()/stop() plumbing the consumer and the follower share."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from schemas.topics import Topic
from topoplace.kafka.broker_kind import TopicMissingError

# A fetch that finds nothing waits this long on the broker. The client default (500 ms) is
# paid by every hop of a pod's path when the embedded broker holds fetches to the limit;
# 50 ms keeps a pod's pending -> bound latency low for a few idle polls per second.
FETCH_MAX_WAIT_MS = 50


class StoppableLoop:
    """run()/stop() plumbing: stop() lets the current message finish, then cancels after a grace."""

    def __init__(self) -> None:
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def stop(self, grace: float = 10.0) -> None:
        self._stopping.set()
        task = self._task
        if task is None or task.done() or task is asyncio.current_task():
            return
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            task.cancel()
            await asyncio.wait({task})

    async def _fetch(
        self, consumer: AIOKafkaConsumer, timeout_ms: int = 1000
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] | None:
        """The next batch, or None once stop() was called."""
        if self._stopping.is_set():
            return None
        fetch = asyncio.ensure_future(consumer.getmany(timeout_ms=timeout_ms))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({fetch, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not fetch.done():
                fetch.cancel()  # uncommitted, so whatever it held is read again later
        if self._stopping.is_set() and not fetch.done():
            return None
        return fetch.result() if not fetch.cancelled() else None


async def all_partitions(consumer: AIOKafkaConsumer, topics: Sequence[Topic]) -> list[TopicPartition]:
    await consumer.topics()  # refreshes metadata
    partitions: list[TopicPartition] = []
    for topic in topics:
        ids = consumer.partitions_for_topic(topic.name)
        if not ids:
            raise TopicMissingError(f"topic {topic.name!r} does not exist on the broker (create it first)")
        partitions += [TopicPartition(topic.name, p) for p in sorted(ids)]
    return partitions
