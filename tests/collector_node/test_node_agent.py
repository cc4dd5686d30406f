"""The node agent: what it publishes and when, with a recording publisher and on the embedded broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from prometheus_client import REGISTRY

from schemas import topics
from schemas.events import DeviceUsage, DeviceUsageEvent, NodeTopologyEvent
from schemas.topics import Topic
from schemas.topology import NodeTopology
from services.collector.node.agent import idle_usage, make_reader, publish_loop, run_node_agent
from services.collector.node.nvml_source import NodeReading, NvmlUnavailableError
from services.collector.node.topology_files import FixtureError, load_topology
from topoplace.config import Settings
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.records import Received

WAIT = 20.0  # seconds: an upper bound on a condition that holds in well under one


class Recorder:
    """A publisher that records sends and sets `stop` once `usage_limit` usage events went out."""

    def __init__(self, stop: asyncio.Event, usage_limit: int) -> None:
        self.sent: list[tuple[str, str | None, msgspec.Struct | None]] = []
        self.stop = stop
        self.usage_limit = usage_limit

    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None:
        name = topic if isinstance(topic, str) else topic.name
        self.sent.append((name, key, event))
        if sum(1 for t, _, _ in self.sent if t == topics.USAGE_DEVICES.name) >= self.usage_limit:
            self.stop.set()

    def kinds(self) -> list[str]:
        return [name for name, _, _ in self.sent]


def reading(topology: NodeTopology, used_mib: int = 0) -> NodeReading:
    usage = tuple(DeviceUsage(index=d.index, memory_used_mib=used_mib) for d in topology.devices)
    return NodeReading(topology=topology, usage=usage)


def sequence(*steps: NodeReading | Exception) -> Callable[[], NodeReading]:
    """A reader that returns (or raises) the given steps in order, then repeats the last."""
    remaining = list(steps)

    def read() -> NodeReading:
        step = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if isinstance(step, Exception):
            raise step
        return step

    return read


async def run_loop(read: Callable[[], NodeReading], usage_limit: int, **kwargs: object) -> Recorder:
    stop = asyncio.Event()
    recorder = Recorder(stop, usage_limit)
    await asyncio.wait_for(
        publish_loop(recorder, read, node="n1", interval_seconds=0.001, stop=stop, clock=lambda: 1234.5, **kwargs),  # type: ignore[arg-type]
        WAIT,
    )
    return recorder


TOPO, USAGE = topics.TOPOLOGY_NODES.name, topics.USAGE_DEVICES.name


async def test_topology_once_then_usage_every_tick() -> None:
    topology = load_topology("pcie-4gpu", node="n1")
    recorder = await run_loop(sequence(reading(topology)), usage_limit=3)
    assert recorder.kinds() == [TOPO, USAGE, USAGE, USAGE]
    assert {key for _, key, _ in recorder.sent} == {"n1"}
    first = recorder.sent[0][2]
    assert isinstance(first, NodeTopologyEvent)
    assert (first.node, first.devices, first.links, first.source, first.observed_at) == (
        "n1",
        topology.devices,
        topology.links,
        topology.source,
        1234.5,
    )
    usage = recorder.sent[1][2]
    assert isinstance(usage, DeviceUsageEvent) and usage.node == "n1" and len(usage.devices) == 4


async def test_topology_is_published_again_when_it_changes() -> None:
    before = load_topology("pcie-4gpu", node="n1")
    after = load_topology("pcie-4gpu", node="n1", memory_mib=1)
    recorder = await run_loop(sequence(reading(before), reading(before, 5), reading(after)), usage_limit=4)
    assert recorder.kinds() == [TOPO, USAGE, USAGE, TOPO, USAGE, USAGE]
    changed = recorder.sent[3][2]
    assert isinstance(changed, NodeTopologyEvent) and {d.memory_mib for d in changed.devices} == {1}
    second_usage = recorder.sent[2][2]
    assert isinstance(second_usage, DeviceUsageEvent) and {u.memory_used_mib for u in second_usage.devices} == {5}


async def test_a_failed_read_skips_one_tick_and_keeps_going() -> None:
    topology = load_topology("pcie-4gpu", node="n1")
    read = sequence(reading(topology), NvmlUnavailableError("driver went away"), reading(topology))
    recorder = await run_loop(read, usage_limit=2)
    assert recorder.kinds() == [TOPO, USAGE, USAGE]


async def test_an_unchanged_topology_is_published_again_after_the_republish_interval() -> None:
    topology = load_topology("pcie-4gpu", node="n1")
    ticks = iter(range(25, 10_000, 25))  # each look at the clock is 25 s later

    recorder = await run_loop(
        sequence(reading(topology)), usage_limit=5, republish_seconds=60.0, monotonic=lambda: float(next(ticks))
    )
    # sent at 25; looked at 50, 75 (too soon), 100 (75 s after): sent again
    assert recorder.kinds() == [TOPO, USAGE, USAGE, USAGE, TOPO, USAGE, USAGE]


async def test_the_agent_publishes_its_topology_again_into_a_restarted_empty_broker() -> None:
    node = f"agent-{uuid.uuid4().hex[:8]}"
    port = free_port()
    first, second = EmbeddedBroker(port=port), EmbeddedBroker(port=port)
    await first.start()
    await ensure_topics(first.bootstrap)
    stop = asyncio.Event()
    # No periodic republication in this test: only the reconnect can bring the topology back.
    settings = Settings(kafka_bootstrap=first.bootstrap, topology_republish_seconds=3600.0)
    agent = asyncio.create_task(
        run_node_agent(settings, node=node, source="pcie-4gpu", interval_seconds=0.05, stop=stop)
    )
    try:
        await asyncio.wait_for(_topology_on(first.bootstrap, node), WAIT)
        first.kill_now()  # as SIGKILL: the in-memory topics are gone
        await second.start()
        await ensure_topics(second.bootstrap)
        event = await asyncio.wait_for(_topology_on(second.bootstrap, node), 2 * WAIT)
        assert not agent.done()
    finally:
        stop.set()
        await asyncio.wait_for(agent, WAIT)
        first.kill_now()
        await second.stop()
    assert event.devices == load_topology("pcie-4gpu", node=node).devices


async def _topology_on(bootstrap: str, node: str) -> NodeTopologyEvent:
    """The first topology of `node` on the broker's topology.nodes (waits for it)."""
    found: asyncio.Future[NodeTopologyEvent] = asyncio.get_running_loop().create_future()

    async def collect(message: Received) -> None:
        if message.key == node and isinstance(message.event, NodeTopologyEvent) and not found.done():
            found.set_result(message.event)

    follower = TopicFollower(bootstrap, [topics.TOPOLOGY_NODES], service="test")
    following = asyncio.create_task(follower.run(collect))
    try:
        waiting: list[asyncio.Future[Any]] = [found, following]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not found.done():
            following.result()  # the follower ended first: its error says why
            raise AssertionError("the follower ended before the topology arrived")
        return found.result()
    finally:
        await follower.stop()
        await asyncio.gather(following, return_exceptions=True)


async def test_the_reading_taken_at_start_is_published_first() -> None:
    first = load_topology("pcie-4gpu", node="n1")
    later = load_topology("dgx1-v100", node="n1")
    recorder = await run_loop(sequence(reading(later)), usage_limit=2, first=reading(first))
    events = [event for name, _, event in recorder.sent if name == TOPO]
    assert [len(e.devices) for e in events if isinstance(e, NodeTopologyEvent)] == [4, 8]


def test_fixture_usage_is_zero_and_healthy() -> None:
    reader = make_reader("trn1.32xlarge", node="t1")
    got = reader()
    assert got.usage == idle_usage(got.topology)
    assert [(u.index, u.memory_used_mib, u.utilization_pct, u.healthy) for u in got.usage] == [
        (i, 0, 0, True) for i in range(16)
    ]


def test_a_fixture_file_is_read_again_on_every_tick(tmp_path: Path) -> None:
    fixture = tmp_path / "box.json"
    doc = {
        "source": "test",
        "machine_type": "box",
        "devices": [{"index": 0, "vendor": "nvidia", "model": "G", "memory_mib": 100}],
    }
    fixture.write_bytes(msgspec.json.encode(doc))
    reader = make_reader(str(fixture), node="b1")
    assert reader().topology.devices[0].memory_mib == 100
    doc["devices"] = [{"index": 0, "vendor": "nvidia", "model": "G", "memory_mib": 200}]
    fixture.write_bytes(msgspec.json.encode(doc))
    assert reader().topology.devices[0].memory_mib == 200


async def test_a_source_that_cannot_be_read_stops_the_agent_before_it_starts() -> None:
    settings = Settings(kafka_bootstrap="127.0.0.1:9", health_port=0)
    with pytest.raises(FixtureError, match="no-such-machine"):
        await asyncio.wait_for(run_node_agent(settings, node="x", source="no-such-machine"), WAIT)
    with pytest.raises(ValueError, match="interval_seconds"):
        await run_node_agent(settings, node="x", source="dgx-h100", interval_seconds=0)


async def test_the_agent_publishes_to_the_broker(fresh_broker: str) -> None:
    node = f"agent-{uuid.uuid4().hex[:8]}"
    health_port = free_port()
    settings = Settings(kafka_bootstrap=fresh_broker, health_port=health_port)
    stop = asyncio.Event()
    agent = asyncio.create_task(
        run_node_agent(settings, node=node, source="dgx1-v100", interval_seconds=0.05, stop=stop)
    )
    topology_seen: list[NodeTopologyEvent] = []
    usage_seen: list[DeviceUsageEvent] = []
    enough = asyncio.Event()

    async def collect(message: Received) -> None:
        if message.key != node:
            return
        if isinstance(message.event, NodeTopologyEvent):
            topology_seen.append(message.event)
        elif isinstance(message.event, DeviceUsageEvent):
            usage_seen.append(message.event)
        if topology_seen and len(usage_seen) >= 2:
            enough.set()

    topics_read = [topics.TOPOLOGY_NODES, topics.USAGE_DEVICES]
    ready_status = await _readiness_once(fresh_broker, topics_read, collect, enough, health_port, stop, agent)

    assert ready_status == 200  # ready once the topology is on Kafka
    expected = load_topology("dgx1-v100", node=node)
    assert len(topology_seen) == 1  # unchanged: published once
    assert (topology_seen[0].devices, topology_seen[0].links) == (expected.devices, expected.links)
    assert all(len(u.devices) == 8 and all(d.healthy and d.memory_used_mib == 0 for d in u.devices) for u in usage_seen)


async def test_a_fleet_publishes_every_member_then_reports_ready(fresh_broker: str) -> None:
    from services.collector.node.fleet import Fleet, FleetMember, run_fleet

    suffix = uuid.uuid4().hex[:8]
    members = (
        FleetMember(node=f"h100-{suffix}", source="dgx-h100"),
        FleetMember(node=f"trn1-{suffix}", source="trn1.32xlarge"),
    )
    health_port = free_port()
    settings = Settings(kafka_bootstrap=fresh_broker, health_port=health_port)
    stop = asyncio.Event()
    fleet = asyncio.create_task(run_fleet(settings, Fleet(members=members), interval_seconds=0.05, stop=stop))
    topologies: dict[str, NodeTopologyEvent] = {}
    all_out = asyncio.Event()

    async def collect(message: Received) -> None:
        if isinstance(message.event, NodeTopologyEvent) and message.key in {m.node for m in members}:
            topologies[message.key] = message.event
            if len(topologies) == len(members):
                all_out.set()

    ready_status = await _readiness_once(
        fresh_broker, [topics.TOPOLOGY_NODES], collect, all_out, health_port, stop, fleet
    )

    assert ready_status == 200
    for member in members:
        expected = load_topology(member.source, node=member.node)
        assert topologies[member.node].devices == expected.devices


async def _readiness_once(
    bootstrap: str,
    read: list[Topic],
    collect: Callable[[Received], Awaitable[None]],
    seen_enough: asyncio.Event,
    health_port: int,
    stop: asyncio.Event,
    service: asyncio.Task[None],
) -> int:
    """Follow `read` into `collect` until `seen_enough`, then the service's /readyz status; stops both."""
    follower = TopicFollower(bootstrap, read, service="test")
    following = asyncio.create_task(follower.run(collect))
    try:
        await asyncio.wait_for(seen_enough.wait(), WAIT)
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{health_port}/readyz") as response,
        ):
            return response.status
    finally:
        stop.set()
        await asyncio.wait_for(service, WAIT)
        await follower.stop()
        await asyncio.wait_for(following, WAIT)


async def test_an_invalid_topology_is_refused_not_published() -> None:
    """Two devices with one UUID, then a link to a device the node lacks: neither goes out; a fixed one does."""
    good = load_topology("pcie-4gpu", node="n1")
    shared_uuid = msgspec.structs.replace(good.devices[1], uuid=good.devices[0].uuid)
    twin = msgspec.structs.replace(good, devices=(good.devices[0], shared_uuid, *good.devices[2:]))
    dangling = msgspec.structs.replace(good, links=(*good.links, msgspec.structs.replace(good.links[0], dst=9)))
    refused = REGISTRY.get_sample_value("topoplace_collector_invalid_topologies_total") or 0.0
    recorder = await run_loop(sequence(reading(twin), reading(dangling), reading(good)), usage_limit=3)
    assert recorder.kinds() == [USAGE, USAGE, TOPO, USAGE]
    published = recorder.sent[2][2]
    assert isinstance(published, NodeTopologyEvent) and published.devices == good.devices
    assert REGISTRY.get_sample_value("topoplace_collector_invalid_topologies_total") == refused + 2


async def test_a_topology_naming_another_node_is_refused() -> None:
    other = load_topology("pcie-4gpu", node="n2")  # the agent of n1 publishes under key n1
    recorder = await run_loop(sequence(reading(other)), usage_limit=2)
    assert TOPO not in recorder.kinds()
