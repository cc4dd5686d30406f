"""The data-loss watch: notice that the broker lost data (an in-memory broker restarted empty).

A Kafka broker never moves an end offset back; the embedded in-memory one comes back from a
restart with every end at 0. Publishers of state (the collectors) republish everything then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas.topics import Topic
from topoplace.kafka.fetch_loop import all_partitions
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.security import KafkaSecurity, client_options

log = logging.getLogger(__name__)


class EndWentBack(msgspec.Struct, frozen=True, kw_only=True):
    """A partition whose end offset shows the broker lost data."""

    topic: str
    partition: int
    end: int  # as the broker reports it now
    before: int  # the highest end it reported before


def ends_gone_back(
    ends: dict[TopicPartition, int], highest: dict[TopicPartition, int], acknowledged: dict[tuple[str, int], int]
) -> list[EndWentBack]:
    """Partitions whose data the broker lost: an end offset below one it reported before, or an
    empty partition where the producer had a record acknowledged.

    Not "an end below what the producer acknowledged": the embedded broker reports a partition's
    end as its last batch's first offset + 1, so after a batched send the end it reports lies below
    the last offset it acknowledged, with nothing lost. Both rules hold there and on Kafka. A loss
    that the partition has refilled past its old end by the next poll is the producer's own
    check: its first send after the loss is acknowledged at an offset it had seen before.
    """
    lost = []
    for tp, end in sorted(ends.items()):
        before = highest.get(tp, 0)
        wrote = acknowledged.get((tp.topic, tp.partition), 0) > 0
        if end < before or (end == 0 and wrote):
            lost.append(EndWentBack(topic=tp.topic, partition=tp.partition, end=end, before=before))
    return lost


async def watch_for_data_loss(
    bootstrap: str,
    topics: Sequence[Topic],
    *,
    producer: EventProducer,
    service: str,
    interval: float,
    security: KafkaSecurity | None = None,
) -> None:
    """Set `producer.recovered` once the broker shows it lost data (restarted empty), by the rules
    of `ends_gone_back`. Runs until cancelled, or until `recovered` is set. A Kafka broker never
    moves an end offset back, so this costs one offsets request per `interval` and never fires
    there; the embedded in-memory broker comes back from a restart with every end at 0.
    """
    recovered = producer.recovered
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, client_id=service, **client_options(security)
    )
    await consumer.start()
    try:
        highest: dict[TopicPartition, int] = {}
        while not recovered.is_set():
            ends = await consumer.end_offsets(await all_partitions(consumer, topics))
            for lost in ends_gone_back(ends, highest, producer.acknowledged_ends()):
                log.warning(
                    "kafka.end_offset_went_back",
                    extra={
                        "fields": {
                            "topic": lost.topic,
                            "partition": lost.partition,
                            "end": lost.end,
                            "before": lost.before,
                            "service": service,
                        }
                    },  # fmt: skip
                )
                recovered.set()
            for tp, end in ends.items():
                highest[tp] = max(end, highest.get(tp, 0))
            if not recovered.is_set():
                await asyncio.sleep(interval)  # a poll: the broker announces nothing
    finally:
        await consumer.stop()
