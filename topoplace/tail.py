"""Follow one topic and hand over each message decoded: `topoplace topics tail`.

A plain consumer outside any consumer group: it commits nothing and moves no
service's offsets. Every partition is read, from the beginning or from the
end as it is when the tail starts.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from schemas import events, topics
from schemas.topics import Topic
from topoplace.kafka.wire import DecodeError, decode_event, decode_key


class Start(enum.StrEnum):
    BEGINNING = "beginning"
    END = "end"


class TailLine(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One message as `topics tail` prints it: where it is, its key, its event (or why it is not one)."""

    topic: str
    partition: int
    offset: int
    key: str | None
    timestamp_ms: int
    event: Any = None  # the decoded event as JSON values; None for a tombstone or an error
    error: str = ""  # why the value is not an event of the topic


def topic_named(name: str) -> Topic:
    """The topic (or a topic's DLQ) called `name`; raises ValueError listing the known names."""
    if name in topics.BY_NAME:
        return topics.BY_NAME[name]
    for topic in topics.ALL:
        if name == topic.dlq:
            return Topic(name=name, event=events.DeadLetterEvent, key=topic.key, compacted=False)
    raise ValueError(f"no topic {name!r} (topics: {', '.join(topics.all_topic_names())})")


def tail_line(topic: Topic, record: ConsumerRecord[bytes, bytes]) -> TailLine:
    """Pure: the printed form of one record of `topic`."""
    where = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "key": decode_key(record.key),
        "timestamp_ms": record.timestamp,
    }
    try:
        event = decode_event(topic, record.value)
    except DecodeError as exc:
        return TailLine(**where, error=exc.error)
    return TailLine(**where, event=msgspec.to_builtins(event) if event is not None else None)


async def tail(
    bootstrap: str,
    topic: Topic,
    start: Start,
    emit: Callable[[TailLine], None],
    stop: asyncio.Event,
    *,
    client_id: str = "topoplace-tail",
    ready: asyncio.Event | None = None,
) -> None:
    """Hand each message of `topic` to `emit` as it arrives, until `stop` is set.

    `ready` is set once the start position is fixed: what is produced after it is shown.
    """
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, client_id=client_id, enable_auto_commit=False
    )
    try:
        await consumer.start()  # a broker that never answers raises here: the consumer is still stopped
        partitions = [TopicPartition(topic.name, p) for p in sorted(await _partitions(consumer, topic.name))]
        consumer.assign(partitions)
        if start is Start.BEGINNING:
            await consumer.seek_to_beginning(*partitions)
        else:
            await consumer.seek_to_end(*partitions)
            # Resolve the end now: messages produced after the tail started are new.
            for partition in partitions:
                await consumer.position(partition)
        if ready is not None:
            ready.set()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                fetch = asyncio.ensure_future(consumer.getmany(timeout_ms=1000))
                await asyncio.wait({fetch, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not fetch.done():
                    fetch.cancel()
                    break
                for records in fetch.result().values():
                    for record in records:
                        emit(tail_line(topic, record))
        finally:
            stopping.cancel()
    finally:
        await consumer.stop()


async def _partitions(consumer: AIOKafkaConsumer, name: str) -> set[int]:
    await consumer.topics()  # refreshes the metadata
    found = consumer.partitions_for_topic(name)
    if not found:
        raise ValueError(f"topic {name!r} does not exist on the broker (run `topoplace topics ensure`)")
    return set(found)
