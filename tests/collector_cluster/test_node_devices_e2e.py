"""Neuron and MetaX nodes reach topology.nodes from their Node objects: run_cluster_watcher, the test API server,
a real broker; a node agent's record of a node is left as it is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from decision_keys import TEST_KEY_SECRET
from test_watch_node_devices import agents_record, metax_json, node_json, trn1_json

from schemas import topics
from schemas.events import NodeTopologyEvent
from services.collector.cluster.node_devices import is_discovered
from services.collector.cluster.service import run_cluster_watcher
from services.collector.node.topology_files import load_topology
from topoplace.config import Settings
from topoplace.dev.broker import EmbeddedBroker
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.follower import TopicFollower, latest_by_key, read_compacted
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

pytestmark = pytest.mark.e2e

WAIT = 60.0  # an upper bound for a failure, never waited out when things work


@pytest.fixture(scope="module")
def own_broker() -> Iterator[str]:
    # A broker of its own: the watcher tombstones the records it finds of nodes the cluster lacks.
    broker = EmbeddedBroker()
    bootstrap = asyncio.run(broker.start())
    try:
        asyncio.run(ensure_topics(bootstrap))
        yield bootstrap
    finally:
        asyncio.run(broker.stop())


class TopologyInbox:
    def __init__(self) -> None:
        self.messages: list[Received] = []
        self._changed = asyncio.Condition()

    async def __call__(self, message: Received) -> None:
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[Received], bool]) -> Received:
        async def first() -> Received:
            async with self._changed:
                await self._changed.wait_for(lambda: any(predicate(m) for m in self.messages))
                return next(m for m in self.messages if predicate(m))

        return await asyncio.wait_for(first(), WAIT)


def discovered(node: str) -> Callable[[Received], bool]:
    return lambda m: m.key == node and isinstance(m.event, NodeTopologyEvent) and is_discovered(m.event)


async def test_neuron_and_metax_nodes_reach_topology_nodes_and_an_agents_node_stays_the_agents(own_broker: str) -> None:
    async with EventProducer(own_broker, service="node-agent") as agent:
        await agent.send(topics.TOPOLOGY_NODES, "trn-agent", agents_record("trn-agent"))
    inbox = TopologyInbox()
    follower = TopicFollower(own_broker, [topics.TOPOLOGY_NODES], service="test-reader")
    reading = asyncio.create_task(follower.run(inbox))
    async with KubeApiServer(bookmark_interval=0.5) as api:
        for body in (trn1_json("trn-1"), metax_json("mx-1"), trn1_json("trn-agent"), node_json("cpu-1")):
            api.store.create("nodes", body)
        settings = Settings(
            kafka_bootstrap=own_broker, kube_api_url=api.url, health_port=0, decision_key=TEST_KEY_SECRET
        )
        stop = asyncio.Event()
        watcher = asyncio.create_task(run_cluster_watcher(settings, resync_seconds=60, stop=stop))
        try:
            trn = (await inbox.wait_for(discovered("trn-1"))).event
            assert isinstance(trn, NodeTopologyEvent)
            assert len(trn.devices) == 16 and sum(d.cores for d in trn.devices) == 32
            assert trn.links == load_topology("trn1.32xlarge", node="trn-1").links  # the 4x4 NeuronLink torus
            mx = (await inbox.wait_for(discovered("mx-1"))).event
            assert isinstance(mx, NodeTopologyEvent) and len(mx.devices) == 8
            assert [d.link_zone for d in mx.devices] == [1, 1, 1, 1, 2, 2, 2, 2]  # two MetaXLink zones
            # a Neuron node added while watching; then one deleted: its record is withdrawn
            api.store.create("nodes", trn1_json("trn-2"))
            await inbox.wait_for(discovered("trn-2"))
            api.store.delete("nodes", "trn-1")
            await inbox.wait_for(lambda m: m.key == "trn-1" and m.event is None)
        finally:
            stop.set()
            await asyncio.wait_for(watcher, WAIT)
            await follower.stop()
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
    # everything the watcher sent is on the broker now: the topic as a placer rebuilds it
    latest = latest_by_key(await read_compacted(own_broker, topics.TOPOLOGY_NODES))
    assert sorted(latest) == ["mx-1", "trn-2", "trn-agent"]
    kept = latest["trn-agent"].event
    assert isinstance(kept, NodeTopologyEvent) and not is_discovered(kept)  # the agent's, as it sent it
    assert not any(discovered("trn-agent")(m) for m in inbox.messages)
