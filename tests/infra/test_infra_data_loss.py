"""The data-loss watch: a broker restarted empty is found; a batched send is not mistaken for a loss."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition

from schemas import events, topics
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.data_loss import EndWentBack, ends_gone_back, watch_for_data_loss
from topoplace.kafka.producer import EventProducer

WAIT = 15.0  # seconds; generous for a loaded 2-core machine, never reached when things work
TOPIC = topics.NODES_STATUS


def status(node: str) -> events.NodeStatusEvent:
    return events.NodeStatusEvent(node=node)


async def end_offsets(bootstrap: str) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        await consumer.topics()
        partitions = [TopicPartition(TOPIC.name, p) for p in sorted(consumer.partitions_for_topic(TOPIC.name) or ())]
        return await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()


def test_an_end_below_one_seen_before_or_an_empty_partition_written_to_is_a_loss() -> None:
    a, b, c = (TopicPartition("t", p) for p in range(3))
    ends = {a: 3, b: 0, c: 5}
    highest = {a: 7, c: 5}
    acknowledged = {("t", 1): 4, ("t", 2): 40}  # c: acknowledged past the end it reports, nothing lost
    assert ends_gone_back(ends, highest, acknowledged) == [
        EndWentBack(topic="t", partition=0, end=3, before=7),
        EndWentBack(topic="t", partition=1, end=0, before=0),
    ]
    assert ends_gone_back({b: 0}, {}, {}) == []  # never written, never seen: empty, not lost


async def test_a_batched_send_is_no_loss_though_the_end_reported_may_lie_below_the_last_acknowledged(
    fresh_broker: str,
) -> None:
    async with EventProducer(fresh_broker, service="test-data-loss") as producer:
        # Sent at once under one key: one partition, one record batch.
        await asyncio.gather(*(producer.send(TOPIC, "one-key", status(f"n{i}")) for i in range(20)))
        acknowledged = producer.acknowledged_ends()
    ends = await end_offsets(fresh_broker)
    assert ends_gone_back(ends, {}, acknowledged) == []
    assert ends_gone_back(ends, dict(ends), acknowledged) == []  # the next poll, nothing new


async def test_a_broker_restarted_empty_between_two_polls_is_found() -> None:
    port = free_port()
    first = EmbeddedBroker(port=port)
    bootstrap = await first.start()
    try:
        await ensure_topics(bootstrap, [TOPIC])
        seen_before_any_send = await end_offsets(bootstrap)
        async with EventProducer(bootstrap, service="test-data-loss") as producer:
            await producer.send(TOPIC, "n1", status("n1"))
            acknowledged = producer.acknowledged_ends()
        seen_after = await end_offsets(bootstrap)
    finally:
        await first.stop()
    async with EmbeddedBroker(port=port) as second:
        await ensure_topics(second.bootstrap, [TOPIC])
        ends = await end_offsets(second.bootstrap)
    (written,) = acknowledged
    lost = [(e.topic, e.partition) for e in ends_gone_back(ends, seen_after, acknowledged)]
    assert lost == [written]
    # Polled only before the send: the end never went back, yet the partition written to is empty.
    lost = [(e.topic, e.partition) for e in ends_gone_back(ends, seen_before_any_send, acknowledged)]
    assert lost == [written]


async def test_the_watch_sets_recovered_when_the_broker_came_back_empty() -> None:
    port = free_port()
    first = EmbeddedBroker(port=port)
    bootstrap = await first.start()
    try:
        await ensure_topics(bootstrap, [TOPIC])
        async with EventProducer(bootstrap, service="test-data-loss") as producer:
            await producer.send(TOPIC, "n1", status("n1"))
            await first.stop()
            async with EmbeddedBroker(port=port) as second:
                await ensure_topics(second.bootstrap, [TOPIC])
                # Its first poll: the partition the producer wrote to is empty.
                watch = watch_for_data_loss(
                    bootstrap, [TOPIC], producer=producer, service="test-data-loss", interval=60
                )
                await asyncio.wait_for(watch, WAIT)  # returns once it has set recovered
                assert producer.recovered.is_set()
    finally:
        await first.stop()
