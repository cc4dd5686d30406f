"""`read_window`: the recent part of a by-time topic, by Kafka's offsets by time and a bound from the end."""

from __future__ import annotations

import time
import uuid

from aiokafka import AIOKafkaProducer

from schemas import topics
from schemas.events import PlacementEvent, PlacementOutcome
from topoplace.kafka.window import Window, read_window
from topoplace.kafka.wire import encode_event

HOUR_MS = 3_600_000


def decision(name: str) -> PlacementEvent:
    return PlacementEvent(
        decision_id=f"d-{name}", uid=str(uuid.uuid4()), namespace="team", name=name, pod_resource_version="1",
        outcome=PlacementOutcome.PLACED, node="node-a",
    )  # fmt: skip


async def publish_at(bootstrap: str, key: str, *stamped: tuple[int, PlacementEvent]) -> None:
    """Each decision with the producer timestamp given, all on `key`'s partition."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for timestamp_ms, event in stamped:
            await producer.send_and_wait(
                topics.PLACEMENTS.name, encode_event(event), key=key.encode(), timestamp_ms=timestamp_ms
            )
    finally:
        await producer.stop()


async def names_in(bootstrap: str, window: Window) -> list[str]:
    received = await read_window(bootstrap, [topics.PLACEMENTS], window, timeout=30.0)
    return [m.event.name for m in received if isinstance(m.event, PlacementEvent)]


async def test_only_messages_since_the_time_are_read(fresh_broker: str) -> None:
    now = int(time.time() * 1000)
    await publish_at(
        fresh_broker,
        "node-a",
        (now - 3 * HOUR_MS, decision("three-hours-ago")),
        (now - 2 * HOUR_MS, decision("two-hours-ago")),
        (now - HOUR_MS // 2, decision("half-an-hour-ago")),
        (now, decision("now")),
    )
    assert await names_in(fresh_broker, Window(since_ms=now - HOUR_MS, last=1000)) == ["half-an-hour-ago", "now"]
    everything = await names_in(fresh_broker, Window(since_ms=now - 4 * HOUR_MS, last=1000))
    assert everything == ["three-hours-ago", "two-hours-ago", "half-an-hour-ago", "now"]
    assert await names_in(fresh_broker, Window(since_ms=now + HOUR_MS, last=1000)) == []


async def test_at_most_the_last_messages_of_a_partition_are_read(fresh_broker: str) -> None:
    now = int(time.time() * 1000)
    await publish_at(fresh_broker, "node-a", *((now, decision(f"pod-{i}")) for i in range(6)))
    await publish_at(fresh_broker, "node-b", (now, decision("other-partition")))
    recent = await names_in(fresh_broker, Window(since_ms=now - HOUR_MS, last=2))
    assert sorted(recent) == ["other-partition", "pod-4", "pod-5"]
