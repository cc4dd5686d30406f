"""Helpers of the infrastructure tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import uuid
from collections.abc import AsyncIterator

from aiokafka import AIOKafkaProducer
from prometheus_client import REGISTRY

from schemas import events
from schemas.topics import Topic
from topoplace.kafka.consumer import EventConsumer
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.records import Handler


def unique_topic(event: type[events.Event], *, compacted: bool = False, partitions: int = 3) -> Topic:
    """A topic no other test writes to (the session broker is shared)."""
    return Topic(
        name=f"test.{uuid.uuid4().hex[:12]}",
        event=event,
        key="test key",
        compacted=compacted,
        partitions=partitions,
    )


def dlq_of(topic: Topic) -> Topic:
    return Topic(name=topic.dlq, event=events.DeadLetterEvent, key=topic.key, compacted=False, partitions=1)


def process_gone(pid: int, *, timeout: float) -> bool:
    """Whether process `pid` has ended (waits up to `timeout` seconds, woken by the kernel)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


@contextlib.asynccontextmanager
async def running(
    reader: EventConsumer | TopicFollower, handler: Handler, *, grace: float = 5.0
) -> AsyncIterator[asyncio.Task[None]]:
    """Run a consumer or follower for the duration of a block, then stop it."""
    task = asyncio.create_task(reader.run(handler))
    try:
        yield task
    finally:
        await reader.stop(grace=grace)
        await asyncio.gather(task, return_exceptions=True)


async def produce_raw(bootstrap: str, topic: str, records: list[tuple[str | None, bytes | None]]) -> None:
    """Write bytes as they are, bypassing EventProducer's encoding (to test bad input)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value=value, key=key.encode() if key is not None else None)
    finally:
        await producer.stop()


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0
