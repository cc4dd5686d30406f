"""Topology and lifecycle events are checked where they are consumed: a bad one is dead-lettered, keyed right.

Through the real topics of a broker of each test's own, the real follower (as the placer
and the binder read their state) and its dead-letter producer.
"""

from __future__ import annotations

import asyncio

import msgspec
from infra_helpers import dlq_of, metric, running

from schemas import topics
from schemas.events import DeadLetterEvent, Event, LifecyclePhase, NodeTopologyEvent, PodLifecycleEvent
from schemas.topics import Topic
from schemas.topology import Device, Link, Vendor
from topoplace.kafka.follower import TopicFollower, read_compacted
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

WAIT = 15.0  # seconds; generous for a loaded 2-core machine, never reached when things work
SERVICE = "test-edge-checks"


def device(index: int, uuid: str) -> Device:
    return Device(index=index, uuid=uuid, vendor=Vendor.NVIDIA, model="H100", memory_mib=81_559)


def topology(node: str, *devices: Device, links: tuple[Link, ...] = ()) -> NodeTopologyEvent:
    return NodeTopologyEvent(node=node, machine_type="test", devices=devices, links=links)


class CompactedState:
    """What a reader of compacted topics keeps: the last event per key; a tombstone removes the key."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str], Event] = {}
        self.seen: list[Received] = []

    async def __call__(self, message: Received) -> None:
        self.seen.append(message)
        assert message.key is not None
        if message.event is None:
            self.by_key.pop((message.topic, message.key), None)
        else:
            self.by_key[(message.topic, message.key)] = message.event


async def follow(bootstrap: str, followed: list[Topic], records: list[tuple[Topic, str, Event]]) -> CompactedState:
    """Send `records` in order with the real producer, then follow the topics until caught up."""
    async with EventProducer(bootstrap, service=SERVICE) as producer:
        for topic, key, event in records:
            await producer.send(topic, key, event)
        state = CompactedState()
        follower = TopicFollower(bootstrap, followed, service=SERVICE, producer=producer)
        async with running(follower, state):
            await asyncio.wait_for(follower.caught_up.wait(), WAIT)
    return state


async def dead_letters(bootstrap: str, topic: Topic) -> list[DeadLetterEvent]:
    letters = [m.event for m in await read_compacted(bootstrap, dlq_of(topic))]
    return [letter for letter in letters if isinstance(letter, DeadLetterEvent)]


def invalid_count(topic: Topic) -> float:
    return metric("topoplace_messages_dead_lettered_total", topic=topic.name, reason="invalid_event", service=SERVICE)


async def test_a_topology_keyed_for_one_node_naming_another_is_dead_lettered(fresh_broker: str) -> None:
    """Any node agent could rewrite gpu-1 under its own key, where no later gpu-1 record compacts it away."""
    real = topology("gpu-1", device(0, "GPU-real-0"), device(1, "GPU-real-1"))
    forged = topology("gpu-1", device(0, "GPU-forged"))
    before = invalid_count(topics.TOPOLOGY_NODES)
    records = [(topics.TOPOLOGY_NODES, "gpu-1", real), (topics.TOPOLOGY_NODES, "gpu-9", forged)]
    state = await follow(fresh_broker, [topics.TOPOLOGY_NODES], records)
    assert state.by_key == {(topics.TOPOLOGY_NODES.name, "gpu-1"): real}
    assert not any(isinstance(m.event, NodeTopologyEvent) and m.event.devices == forged.devices for m in state.seen)
    (letter,) = await dead_letters(fresh_broker, topics.TOPOLOGY_NODES)
    assert letter.key == "gpu-9"
    assert letter.error == "key: the message is keyed 'gpu-9' but its node is 'gpu-1': the key must name it"
    assert invalid_count(topics.TOPOLOGY_NODES) == before + 1


async def test_one_uuid_on_two_indices_is_dead_lettered_and_leaves_no_older_topology_behind(fresh_broker: str) -> None:
    """The invalid record is the key's last: its older valid record must not stand in for it (compaction drops it)."""
    valid = topology("gpu-3", device(0, "GPU-a"), device(1, "GPU-b"))
    twin = topology("gpu-3", device(0, "GPU-a"), device(1, "GPU-a"))
    other = topology("gpu-4", device(0, "GPU-c"))
    records = [(topics.TOPOLOGY_NODES, "gpu-3", valid), (topics.TOPOLOGY_NODES, "gpu-3", twin)]
    state = await follow(fresh_broker, [topics.TOPOLOGY_NODES], [*records, (topics.TOPOLOGY_NODES, "gpu-4", other)])
    assert state.by_key == {(topics.TOPOLOGY_NODES.name, "gpu-4"): other}
    (letter,) = await dead_letters(fresh_broker, topics.TOPOLOGY_NODES)
    assert letter.key == "gpu-3"
    assert letter.error == "devices[1].uuid: 'GPU-a' is also the UUID of device 0: one device cannot have two indices"
    assert msgspec.json.decode(letter.value.encode(), type=NodeTopologyEvent) == twin


async def test_the_engines_node_rules_apply_to_a_published_topology(fresh_broker: str) -> None:
    dangling = topology("gpu-5", device(0, "GPU-d"), links=(Link(src=0, dst=5, nvlinks=18),))
    twice = topology("gpu-6", device(2, "GPU-e"), device(2, "GPU-f"))
    records = [(topics.TOPOLOGY_NODES, "gpu-5", dangling), (topics.TOPOLOGY_NODES, "gpu-6", twice)]
    state = await follow(fresh_broker, [topics.TOPOLOGY_NODES], records)
    assert state.by_key == {}
    errors = sorted(letter.error for letter in await dead_letters(fresh_broker, topics.TOPOLOGY_NODES))
    assert errors == [
        "devices[1].index: device 2 appears twice (also devices[0])",
        "links[0].dst: no device 5 on node 'gpu-5'",
    ]


async def test_a_lifecycle_event_keyed_by_another_pods_uid_is_dead_lettered(fresh_broker: str) -> None:
    bound = PodLifecycleEvent(uid="uid-a", namespace="ml", name="a", phase=LifecyclePhase.BOUND, node="gpu-1")
    forged = msgspec.structs.replace(bound, uid="uid-b", name="b")
    records = [(topics.PODS_LIFECYCLE, "uid-a", bound), (topics.PODS_LIFECYCLE, "uid-c", forged)]
    state = await follow(fresh_broker, [topics.PODS_LIFECYCLE], records)
    assert state.by_key == {(topics.PODS_LIFECYCLE.name, "uid-a"): bound}
    (letter,) = await dead_letters(fresh_broker, topics.PODS_LIFECYCLE)
    assert (letter.key, letter.error) == (
        "uid-c",
        "key: the message is keyed 'uid-c' but its uid is 'uid-b': the key must name it",
    )
