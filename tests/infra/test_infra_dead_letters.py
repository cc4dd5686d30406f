"""Dead letters are bounded, and a dead letter that cannot be sent never stops a partition."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import msgspec
from infra_helpers import dlq_of, metric, produce_raw, running

from schemas import events
from schemas.topics import Topic
from topoplace.kafka.consumer import EventConsumer
from topoplace.kafka.dead_letters import DLQ_VALUE_MAX_BYTES
from topoplace.kafka.follower import read_compacted
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

WAIT = 15.0  # seconds; generous for a loaded 2-core machine, never reached when things work


def pending(uid: str) -> events.PendingPodEvent:
    return events.PendingPodEvent(uid=uid, namespace="ml", name=uid, resource_version="1", requests={})


async def consume_until(
    bootstrap: str, topic: Topic, producer: EventProducer, service: str, last_uid: str
) -> list[Received]:
    """Consume `topic` until the event of `last_uid` was handled; fails if the consumer ends first."""
    handled: list[Received] = []
    done = asyncio.Event()

    async def handle(message: Received) -> None:
        handled.append(message)
        if isinstance(message.event, events.PendingPodEvent) and message.event.uid == last_uid:
            done.set()

    consumer = EventConsumer(
        bootstrap, [topic], group_id=f"test-{uuid.uuid4().hex[:8]}", service=service, producer=producer
    )
    async with running(consumer, handle) as task:
        waiter = asyncio.ensure_future(done.wait())
        finished, _ = await asyncio.wait({waiter, task}, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        assert waiter in finished, f"the consumer ended or stalled before {last_uid}: {task}"
    return handled


async def test_a_huge_value_full_of_control_characters_is_dead_lettered_truncated(
    kafka_bootstrap: str, pending_topic: Topic
) -> None:
    huge = bytes(range(1, 32)) * (300_000 // 31)  # escaped as JSON it is about six times as long
    await produce_raw(kafka_bootstrap, pending_topic.name, [("k", huge), ("k", msgspec.json.encode(pending("after")))])
    async with EventProducer(kafka_bootstrap, service="test-dlq-huge") as producer:
        handled = await consume_until(kafka_bootstrap, pending_topic, producer, "test-dlq-huge", "after")
    assert [m.offset for m in handled] == [1]

    (dead_message,) = await read_compacted(kafka_bootstrap, dlq_of(pending_topic))
    dead = dead_message.event
    assert isinstance(dead, events.DeadLetterEvent)
    assert dead.value_size == len(huge)
    assert dead.value_sha256 == hashlib.sha256(huge).hexdigest()
    assert dead.value_truncated
    assert len(dead.value.encode("utf-8")) <= DLQ_VALUE_MAX_BYTES
    assert huge.decode("utf-8").startswith(dead.value)


async def test_a_small_bad_value_is_dead_lettered_whole(kafka_bootstrap: str, pending_topic: Topic) -> None:
    await produce_raw(kafka_bootstrap, pending_topic.name, [("k", b"{nope"), ("k", msgspec.json.encode(pending("z")))])
    async with EventProducer(kafka_bootstrap, service="test-dlq-small") as producer:
        await consume_until(kafka_bootstrap, pending_topic, producer, "test-dlq-small", "z")
    (dead_message,) = await read_compacted(kafka_bootstrap, dlq_of(pending_topic))
    dead = dead_message.event
    assert isinstance(dead, events.DeadLetterEvent)
    assert (dead.value, dead.value_size, dead.value_truncated) == ("{nope", 5, False)
    assert dead.value_sha256 == hashlib.sha256(b"{nope").hexdigest()


class DeadLetterRefused(EventProducer):
    """A producer whose dead letters all fail, as when the DLQ is full or gone."""

    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None:
        if isinstance(event, events.DeadLetterEvent):
            raise RuntimeError("the dead-letter topic refused the message")
        await super().send(topic, key, event)


async def test_a_dead_letter_that_cannot_be_sent_is_counted_and_the_partition_goes_on(
    kafka_bootstrap: str, pending_topic: Topic
) -> None:
    await produce_raw(
        kafka_bootstrap, pending_topic.name, [("k", b"{bad"), ("k", msgspec.json.encode(pending("next")))]
    )
    async with DeadLetterRefused(kafka_bootstrap, service="test-dlq-refused") as producer:
        handled = await consume_until(kafka_bootstrap, pending_topic, producer, "test-dlq-refused", "next")
    assert [m.offset for m in handled] == [1]
    assert metric("topoplace_dead_letters_failed_total", topic=pending_topic.name, service="test-dlq-refused") == 1
