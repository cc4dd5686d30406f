"""Bad input never stops a service: a malformed message on each input topic goes to its DLQ with the reason."""

from __future__ import annotations

import asyncio
import contextlib

import msgspec
import pytest
from aiokafka import AIOKafkaProducer
from e2e_cluster import PodSpec, create_pod
from e2e_pipeline import Pipeline

from schemas import topics
from schemas.events import DeadLetterEvent
from schemas.topics import Topic
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.records import Received

pytestmark = pytest.mark.e2e

PLACER, BINDER = "topoplace-placer", "topoplace-binder"


class Malformed(msgspec.Struct, frozen=True, kw_only=True):
    topic: Topic
    value: bytes
    names: str  # what the DLQ's error must name: the field, or the broken encoding
    readers: frozenset[str]  # the services that consume the topic


# One kind of damage per topic, every kind somewhere: not JSON, a wrong type, an
# unknown schema version, a missing field, a value outside an enum.
MALFORMED: tuple[Malformed, ...] = (
    Malformed(
        topic=topics.TOPOLOGY_NODES,
        value=b'{"node": "x", "devices": [',
        names="JSON",
        readers=frozenset({PLACER, BINDER}),
    ),
    Malformed(
        topic=topics.USAGE_DEVICES,
        value=b'{"schema_version": 1, "node": "x", "devices": [{"index": "zero"}]}',
        names="devices[0].index",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.NODES_STATUS,
        value=b'{"schema_version": 99, "node": "x"}',
        names="schema_version",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.TOPOLOGY_NETWORK,
        value=b'{"schema_version": 1, "name": "x", "tier": 1}',
        names="members",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.TOPOLOGY_LEVELS,
        value=b'{"schema_version": 1, "name": "x"}',
        names="levels",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.RESOURCE_SLICES,
        value=b'{"schema_version": 1, "name": "s", "node": "x", "driver": "d", "pool": "p", "devices": [{}]}',
        names="devices[0]",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.RESOURCE_CLAIMS,
        value=b'{"schema_version": 1, "uid": "u", "namespace": "ns", "name": "c", "devices": [{"driver": "d"}]}',
        names="devices[0]",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.RESOURCE_CLASSES,
        value=b'{"schema_version": 1, "name": "gpu", "spec": {"selectors": "all"}}',
        names="spec.selectors",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.RESOURCE_TAINT_RULES,
        value=b'{"schema_version": 1, "name": "r", "deleted": "yes"}',
        names="deleted",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.NAMESPACES,
        value=b'{"schema_version": 1, "name": "ns", "labels": {"team": 7}}',
        names="labels",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.STORAGE_CLAIMS,
        value=b'{"schema_version": 1, "claim": {"namespace": "ns", "name": "c", "request_bytes": "lots"}}',
        names="claim.request_bytes",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.STORAGE_VOLUMES,  # well formed, but keyed by another object than it describes
        value=b'{"schema_version": 1, "volume": {"name": "pv-1", "capacity_bytes": 1}}',
        names="key",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.STORAGE_CLASSES,
        value=b'{"schema_version": 1, "default": true}',
        names="storage_class",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.STORAGE_CSINODES,
        value=b'{"schema_version": 1, "node": "n1", "limits": {"ebs.csi.aws.com": -1}}',
        names="limits",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.DISRUPTION_BUDGETS,
        value=b'{"schema_version": 1, "namespace": "ns", "name": "b", "disruptions_allowed": "two"}',
        names="disruptions_allowed",
        readers=frozenset({PLACER}),
    ),
    Malformed(topic=topics.PODS_PENDING, value=b"pending pod, not JSON", names="JSON", readers=frozenset({PLACER})),
    Malformed(
        topic=topics.GANGS_PENDING,
        value=b'{"schema_version": 1, "name": "ns/g", "namespace": "ns", "members": "all of them"}',
        names="members",
        readers=frozenset({PLACER}),
    ),
    Malformed(
        topic=topics.GANG_PLACEMENTS,
        value=b'{"schema_version": 1, "decision_id": "d", "name": "ns/g", "namespace": "ns", "outcome": "maybe",'
        b' "members": []}',
        names="outcome",
        readers=frozenset({PLACER, BINDER}),
    ),
    Malformed(
        topic=topics.PODS_LIFECYCLE,
        value=b'{"schema_version": 1, "uid": "x", "namespace": "default", "name": "x", "phase": "exploded"}',
        names="phase",
        readers=frozenset({PLACER, BINDER}),
    ),
    Malformed(
        topic=topics.PLACEMENTS,
        value=b'{"schema_version": 1, "decision_id": "d", "uid": "x", "namespace": "default", "name": "x",'
        b' "pod_resource_version": "1", "outcome": "maybe"}',
        names="outcome",
        readers=frozenset({PLACER, BINDER}),
    ),
    Malformed(
        topic=topics.BINDINGS,
        value=b'{"schema_version": 2, "uid": "x"}',
        names="schema_version",
        readers=frozenset({PLACER}),
    ),
)


class Sent(msgspec.Struct, frozen=True, kw_only=True):
    topic: str
    partition: int
    offset: int
    key: str
    value: bytes


class DeadLetters:
    """Every DeadLetterEvent on the DLQ topics, by (topic, partition, offset) of the message it rejects."""

    def __init__(self) -> None:
        self.by_message: dict[tuple[str, int, int], list[DeadLetterEvent]] = {}
        self.changed = asyncio.Condition()

    async def record(self, received: Received) -> None:
        letter = received.event
        if isinstance(letter, DeadLetterEvent):
            async with self.changed:
                self.by_message.setdefault((letter.topic, letter.partition, letter.offset), []).append(letter)
                self.changed.notify_all()

    def about(self, sent: Sent) -> list[DeadLetterEvent]:
        return self.by_message.get((sent.topic, sent.partition, sent.offset), [])


def dlq_topic(topic: Topic) -> Topic:
    return Topic(name=topic.dlq, event=DeadLetterEvent, key="the original key", compacted=False)


async def send_raw(bootstrap: str, run_id: str) -> dict[str, Sent]:
    """The malformed bytes, as a broken producer would send them."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="topoplace-e2e")
    await producer.start()
    try:
        sent = {}
        for bad in MALFORMED:
            key = f"{run_id}-malformed"
            meta = await producer.send_and_wait(bad.topic.name, bad.value, key=key.encode())
            sent[bad.topic.name] = Sent(
                topic=bad.topic.name, partition=meta.partition, offset=meta.offset, key=key, value=bad.value
            )
        return sent
    finally:
        await producer.stop()


async def test_a_malformed_message_on_every_input_topic_is_dead_lettered_with_its_reason_and_the_services_go_on(
    pipeline: Pipeline, run_id: str
) -> None:
    assert {bad.topic.name for bad in MALFORMED} == {t.name for t in topics.ALL}
    letters = DeadLetters()
    follower = TopicFollower(pipeline.bootstrap, [dlq_topic(t) for t in topics.ALL], service="topoplace-e2e")
    following = asyncio.create_task(follower.run(letters.record))
    try:
        await pipeline.start_all()
        sent = await send_raw(pipeline.bootstrap, run_id)

        def missing() -> dict[str, set[str]]:
            """topic -> the services that have not dead-lettered its malformed message yet."""
            gaps = {
                bad.topic.name: set(bad.readers - {d.service for d in letters.about(sent[bad.topic.name])})
                for bad in MALFORMED
            }
            return {topic: services for topic, services in gaps.items() if services}

        async def every_reader_rejected() -> None:
            async with letters.changed:
                await letters.changed.wait_for(lambda: not missing())

        try:
            await asyncio.wait_for(every_reader_rejected(), timeout=30)
        except TimeoutError:
            pipeline.raise_if_died()
            raise AssertionError(f"no dead letter after 30 s for: {missing()}") from None
        pipeline.raise_if_died()

        for bad in MALFORMED:
            original = sent[bad.topic.name]
            for letter in letters.about(original):
                assert letter.key == original.key, bad.topic.name
                assert letter.value == original.value.decode(), bad.topic.name
                assert bad.names in letter.error, f"{bad.topic.name}: {letter.error!r} does not name {bad.names!r}"

        # The services went on: a pod submitted now is still bound.
        uid = create_pod(pipeline.kube_api.store, PodSpec(name=f"{run_id}-after-bad-input", gpus=1))
        await pipeline.wait_until(lambda o: o.bound(uid) is not None, what="a pod bound after the bad input")
    finally:
        await follower.stop()
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await following
