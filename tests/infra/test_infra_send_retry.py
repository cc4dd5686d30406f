"""EventProducer.send retries transient Kafka errors with backoff, a bounded number of times."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError, MessageSizeTooLargeError, UnknownError
from infra_helpers import metric

from schemas import events
from schemas.topics import Topic
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.follower import read_compacted
from topoplace.kafka.producer import EventProducer
from topoplace.supervise import Backoff

FAST = Backoff(base=0.001, cap=0.005)


def status(node: str) -> events.NodeStatusEvent:
    return events.NodeStatusEvent(node=node)


class Failing:
    """Stands in for aiokafka's send_and_wait: raises the given errors in turn, then sends."""

    def __init__(self, real: Any, errors: list[Exception]) -> None:
        self.real = real
        self.errors = errors
        self.calls = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return await self.real(*args, **kwargs)


@pytest.mark.parametrize("error", [UnknownError, KafkaConnectionError])
async def test_a_transient_error_is_retried_until_the_send_succeeds(
    kafka_bootstrap: str, compacted_topic: Topic, error: type[Exception]
) -> None:
    service = f"test-retry-{uuid.uuid4().hex[:6]}"
    async with EventProducer(kafka_bootstrap, service=service, backoff=FAST) as producer:
        assert producer._producer is not None
        failing = Failing(producer._producer.send_and_wait, [error(), error()])
        producer._producer.send_and_wait = failing
        assert not producer.recovered.is_set()
        await producer.send(compacted_topic, "n1", status("n1"))
        assert producer.recovered.is_set()  # the collectors republish their state on this
    assert failing.calls == 3
    assert metric("topoplace_send_retries_total", topic=compacted_topic.name, service=service) == 2
    assert [m.key for m in await read_compacted(kafka_bootstrap, compacted_topic)] == ["n1"]


async def test_retries_are_bounded_then_the_error_is_raised(kafka_bootstrap: str, compacted_topic: Topic) -> None:
    async with EventProducer(kafka_bootstrap, service="test-retry", send_attempts=3, backoff=FAST) as producer:
        assert producer._producer is not None
        failing = Failing(producer._producer.send_and_wait, [UnknownError() for _ in range(5)])
        producer._producer.send_and_wait = failing
        with pytest.raises(UnknownError):
            await producer.send(compacted_topic, "n1", status("n1"))
        assert not producer.recovered.is_set()
    assert failing.calls == 3


async def test_a_permanent_error_is_raised_at_once(kafka_bootstrap: str, compacted_topic: Topic) -> None:
    async with EventProducer(kafka_bootstrap, service="test-retry", backoff=FAST) as producer:
        assert producer._producer is not None
        failing = Failing(producer._producer.send_and_wait, [MessageSizeTooLargeError()])
        producer._producer.send_and_wait = failing
        with pytest.raises(MessageSizeTooLargeError):
            await producer.send(compacted_topic, "n1", status("n1"))
    assert failing.calls == 1


async def test_a_send_after_a_broker_restart_goes_through(compacted_topic: Topic) -> None:
    port = free_port()
    first = EmbeddedBroker(port=port)
    await first.start()
    second = EmbeddedBroker(port=port)
    try:
        await ensure_topics(first.bootstrap, [compacted_topic])
        async with EventProducer(first.bootstrap, service="test-restart") as producer:
            await producer.send(compacted_topic, "before", status("before"))
            first.kill_now()  # as SIGKILL: the memory storage is gone
            await second.start()
            await ensure_topics(second.bootstrap, [compacted_topic])
            await producer.send(compacted_topic, "after", status("after"))
            # aiokafka reconnected by itself; the offset that went back says the data was lost
            assert producer.recovered.is_set()
        assert [m.key for m in await read_compacted(second.bootstrap, compacted_topic)] == ["after"]
    finally:
        first.kill_now()
        await second.stop()
