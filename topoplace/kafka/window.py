"""Read the recent part of by-time topics, once, outside any group: what `topoplace explain` looks at.

A question about one pod must not cost a read of everything the topics retain. Each partition
is read from the first offset at or after a point in time (the broker's time index, Kafka's
ListOffsets by timestamp) but at most its last `last` messages, up to the end it had when the
read began. Records older than the point in time are dropped as well: a broker whose time
index answers coarsely (the embedded one answers a partition's first offset) still gives the
same answer, only at the cost of reading more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.topics import Topic
from topoplace.kafka.fetch_loop import FETCH_MAX_WAIT_MS, all_partitions
from topoplace.kafka.records import Received, RecordProcessor
from topoplace.kafka.security import KafkaSecurity, client_options


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """Which messages of a partition to read: those produced at or after `since_ms`, at most its last `last`."""

    since_ms: int  # producer timestamps, milliseconds since the epoch
    last: int  # messages per partition, counted back from the end


async def start_offsets(
    consumer: AIOKafkaConsumer, partitions: Sequence[TopicPartition], window: Window
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Per partition: the offset to read from, and the end offset (exclusive) to read up to."""
    ends = await consumer.end_offsets(list(partitions))
    beginnings = await consumer.beginning_offsets(list(partitions))
    by_time = await consumer.offsets_for_times({tp: window.since_ms for tp in partitions})
    starts: dict[TopicPartition, int] = {}
    for tp in partitions:
        found = by_time.get(tp)
        first_recent = ends[tp] if found is None else found.offset  # None: nothing that recent
        starts[tp] = min(ends[tp], max(beginnings[tp], first_recent, ends[tp] - window.last))
    return starts, ends


async def read_window(
    bootstrap: str,
    topics: Sequence[Topic],
    window: Window,
    *,
    service: str = "topoplace-reader",
    timeout: float = 30.0,
    security: KafkaSecurity | None = None,
) -> list[Received]:
    """The messages of `topics` inside `window`, in order within a partition.

    Bad messages are logged, counted and skipped. Raises TimeoutError when the ends are
    not reached within `timeout` seconds.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        client_id=service,
        enable_auto_commit=False,
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        **client_options(security),
    )
    processor = RecordProcessor(topics, service, producer=None)
    received: list[Received] = []

    async def keep(message: Received) -> None:
        if message.timestamp_ms >= window.since_ms:
            received.append(message)

    async def read() -> None:
        await consumer.start()
        partitions = await all_partitions(consumer, topics)
        consumer.assign(partitions)
        starts, ends = await start_offsets(consumer, partitions, window)
        pending = {tp for tp in partitions if starts[tp] < ends[tp]}
        for tp in partitions:
            consumer.seek(tp, starts[tp])
        while pending:
            batches = await consumer.getmany(*pending, timeout_ms=200)
            for records in batches.values():
                for record in records:
                    await processor.process(record, keep)
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)

    try:
        await asyncio.wait_for(read(), timeout)
    finally:
        await consumer.stop()
    return received
