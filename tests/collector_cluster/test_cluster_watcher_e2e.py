"""run_cluster_watcher end to end: the test API server, a real broker, traces in a file."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from cluster_objects import hypernode_json, node_json, pod_json
from decision_keys import TEST_KEY_SECRET
from opentelemetry import trace

from schemas import topics
from schemas.events import (
    DeviceAssignment,
    HyperNodeEvent,
    LifecyclePhase,
    NodeStatusEvent,
    PendingGangEvent,
    PendingPodEvent,
    PodLifecycleEvent,
)
from services.collector.cluster import gangs
from services.collector.cluster.service import run_cluster_watcher
from topoplace.config import Settings
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received
from topoplace.telemetry import read_spans

pytestmark = pytest.mark.e2e

WATCHED = (
    topics.PODS_PENDING,
    topics.GANGS_PENDING,
    topics.PODS_LIFECYCLE,
    topics.NODES_STATUS,
    topics.TOPOLOGY_NETWORK,
)


@pytest.fixture(scope="module")
def own_broker() -> Iterator[str]:
    # A broker of its own: at start the watcher reconciles the compacted topics with the
    # cluster, and would report other tests' pods and nodes as deleted.
    broker = EmbeddedBroker()
    bootstrap = asyncio.run(broker.start())
    try:
        asyncio.run(ensure_topics(bootstrap))
        yield bootstrap
    finally:
        asyncio.run(broker.stop())


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Received] = []
        self._changed = asyncio.Condition()

    async def __call__(self, message: Received) -> None:
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    # An upper bound for a failure, never waited out when things work: the watcher syncs ten informers
    # before it publishes, which on a loaded machine can take longer than a quiet one suggests.
    async def wait_for(self, predicate: Callable[[Received], bool], timeout: float = 60.0) -> Received:
        async def first() -> Received:
            async with self._changed:
                await self._changed.wait_for(lambda: any(predicate(m) for m in self.messages))
                return next(m for m in self.messages if predicate(m))

        return await asyncio.wait_for(first(), timeout)


@pytest.fixture
async def inbox(own_broker: str) -> AsyncIterator[Inbox]:
    box = Inbox()
    follower = TopicFollower(own_broker, WATCHED, service="test-reader")
    task = asyncio.create_task(follower.run(box))
    yield box
    await follower.stop()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


class Watcher:
    """run_cluster_watcher in a task, stopped through its `stop` event."""

    def __init__(self, settings: Settings, **kw: object) -> None:
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(run_cluster_watcher(settings, stop=self.stop, **kw))  # type: ignore[arg-type]

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 15)


def is_event(kind: type, **want: object) -> Callable[[Received], bool]:
    return lambda m: isinstance(m.event, kind) and all(getattr(m.event, k) == v for k, v in want.items())


async def test_pods_nodes_and_hypernodes_reach_their_topics(own_broker: str, inbox: Inbox, tmp_path: Path) -> None:
    traces = tmp_path / "spans.jsonl"
    async with KubeApiServer() as api:
        settings = Settings(
            kafka_bootstrap=own_broker,
            kube_api_url=api.url,
            traces_file=str(traces),
            health_port=0,
            decision_key=TEST_KEY_SECRET,
        )
        store = api.store
        store.create("nodes", node_json("e2e-node-1"))
        store.create("hypernodes.topology.volcano.sh", hypernode_json("e2e-tor", 1, [("Node", "e2e-node-1")]))
        watcher = Watcher(settings, resync_seconds=60)
        try:
            pod = store.create("pods", {**pod_json("e2e-pod"), "metadata": {"name": "e2e-pod"}}, namespace="default")
            store.create(
                "pods",
                {**pod_json("e2e-other", scheduler="default-scheduler"), "metadata": {"name": "e2e-other"}},
                namespace="default",
            )
            uid = pod["metadata"]["uid"]
            pending = await inbox.wait_for(is_event(PendingPodEvent, uid=uid))
            assert pending.topic == topics.PODS_PENDING.name and pending.key == uid
            node = await inbox.wait_for(is_event(NodeStatusEvent, node="e2e-node-1"))
            assert node.key == "e2e-node-1" and node.topic == topics.NODES_STATUS.name
            network = await inbox.wait_for(is_event(HyperNodeEvent, name="e2e-tor"))
            assert network.key == "e2e-tor" and [m.name for m in network.event.members] == ["e2e-node-1"]  # type: ignore[union-attr]

            store.bind(
                "default",
                "e2e-pod",
                {"metadata": {"name": "e2e-pod", "uid": uid}, "target": {"kind": "Node", "name": "e2e-node-1"}},
            )
            bound = await inbox.wait_for(is_event(PodLifecycleEvent, uid=uid, phase=LifecyclePhase.BOUND))
            assert bound.event.node == "e2e-node-1"  # type: ignore[union-attr]
            store.delete("pods", "e2e-pod", namespace="default")
            await inbox.wait_for(is_event(PodLifecycleEvent, uid=uid, phase=LifecyclePhase.DELETED))
            store.delete("hypernodes.topology.volcano.sh", "e2e-tor")
            await inbox.wait_for(lambda m: m.key == "e2e-tor" and m.event is None)
        finally:
            await watcher.close()
    assert not any(getattr(m.event, "name", "") == "e2e-other" for m in inbox.messages)
    # the pending event travelled inside the "pod.pending" span of the collector
    spans = [s for s in read_spans(str(traces)) if s.name == "pod.pending" and s.attributes.get("k8s.pod.uid") == uid]
    assert len(spans) == 1
    span = spans[0]
    assert span.service_name == "topoplace-collector"
    assert span.attributes["k8s.pod.name"] == "e2e-pod" and span.attributes["k8s.pod.namespace"] == "default"
    carried = trace.get_current_span(pending.trace_context).get_span_context()
    assert f"{carried.trace_id:032x}" == span.trace_id


async def test_a_pod_deleted_while_the_watcher_was_down_is_reported_at_restart(own_broker: str, inbox: Inbox) -> None:
    async with KubeApiServer() as api:
        settings = Settings(
            kafka_bootstrap=own_broker, kube_api_url=api.url, health_port=0, decision_key=TEST_KEY_SECRET
        )
        pod = api.store.create(
            "pods", {**pod_json("e2e-bound", node="e2e-node-2"), "metadata": {"name": "e2e-bound"}}, namespace="default"
        )
        uid = pod["metadata"]["uid"]
        watcher = Watcher(settings, resync_seconds=60)
        try:
            await inbox.wait_for(is_event(PodLifecycleEvent, uid=uid, phase=LifecyclePhase.BOUND))
        finally:
            await watcher.close()
        api.store.delete("pods", "e2e-bound", namespace="default")
        watcher = Watcher(settings, resync_seconds=60)
        try:
            deleted = await inbox.wait_for(is_event(PodLifecycleEvent, uid=uid, phase=LifecyclePhase.DELETED))
        finally:
            await watcher.close()
    assert deleted.event.node == "e2e-node-2"  # type: ignore[union-attr]


async def test_a_kueue_gang_reaches_gangs_pending_inside_its_span(
    own_broker: str, inbox: Inbox, tmp_path: Path
) -> None:
    traces = tmp_path / "spans.jsonl"
    async with KubeApiServer() as api:
        settings = Settings(
            kafka_bootstrap=own_broker,
            kube_api_url=api.url,
            traces_file=str(traces),
            health_port=0,
            decision_key=TEST_KEY_SECRET,
        )
        watcher = Watcher(settings, resync_seconds=60)
        try:
            uids = []
            for name in ("e2e-k-0", "e2e-k-1"):
                body = pod_json(
                    name,
                    namespace="e2e",
                    labels={gangs.KUEUE_GROUP_NAME: "e2e-gang"},
                    annotations={gangs.KUEUE_TOTAL_COUNT: "2"},
                )
                body["metadata"] = {k: v for k, v in body["metadata"].items() if k not in ("uid", "resourceVersion")}
                uids.append(api.store.create("pods", body, namespace="e2e")["metadata"]["uid"])
            message = await inbox.wait_for(is_event(PendingGangEvent, name="e2e/e2e-gang"))
        finally:
            await watcher.close()
    assert message.topic == topics.GANGS_PENDING.name and message.key == "e2e/e2e-gang"
    gang = message.event
    assert isinstance(gang, PendingGangEvent) and sorted(m.uid for m in gang.members) == sorted(uids)
    assert not any(m.topic == topics.PODS_PENDING.name and m.key in uids for m in inbox.messages)
    spans = [
        s
        for s in read_spans(str(traces))
        if s.name == "gang.pending" and s.attributes.get("topoplace.gang.name") == "e2e/e2e-gang"
    ]
    assert len(spans) == 1
    member_uids = spans[0].attributes["topoplace.gang.member_uids"]
    assert isinstance(member_uids, list) and sorted(member_uids) == sorted(uids)
    carried = trace.get_current_span(message.trace_context).get_span_context()
    assert f"{carried.trace_id:032x}" == spans[0].trace_id


async def test_after_a_broker_restart_the_watcher_relists_and_republishes_everything() -> None:
    port = free_port()
    first, second = EmbeddedBroker(port=port), EmbeddedBroker(port=port)
    await first.start()
    await ensure_topics(first.bootstrap)
    async with KubeApiServer() as api:
        api.store.create("nodes", node_json("restart-node"))
        api.store.create("hypernodes.topology.volcano.sh", hypernode_json("restart-tor", 1, [("Node", "restart-node")]))
        pod = api.store.create("pods", {**pod_json("restart-pod"), "metadata": {"name": "restart-pod"}},
                               namespace="default")  # fmt: skip
        uid = pod["metadata"]["uid"]
        settings = Settings(
            kafka_bootstrap=first.bootstrap, kube_api_url=api.url, health_port=0, decision_key=TEST_KEY_SECRET
        )
        watcher = Watcher(settings, resync_seconds=3600, broker_check_seconds=0.1)  # no resync during the test
        try:
            before = Inbox()
            async with _following(first.bootstrap, before):
                await before.wait_for(is_event(NodeStatusEvent, node="restart-node"))
                await before.wait_for(is_event(HyperNodeEvent, name="restart-tor"))
                await before.wait_for(is_event(PendingPodEvent, uid=uid))
            first.kill_now()  # as SIGKILL: every topic is gone
            await second.start()
            await ensure_topics(second.bootstrap)
            after = Inbox()
            async with _following(second.bootstrap, after):
                await after.wait_for(is_event(NodeStatusEvent, node="restart-node"), timeout=40)
                await after.wait_for(is_event(HyperNodeEvent, name="restart-tor"), timeout=40)
                await after.wait_for(is_event(PendingPodEvent, uid=uid), timeout=40)
            assert not watcher.task.done()
        finally:
            await watcher.close()
            first.kill_now()
            await second.stop()


@contextlib.asynccontextmanager
async def _following(bootstrap: str, inbox: Inbox) -> AsyncIterator[None]:
    follower = TopicFollower(bootstrap, WATCHED, service="test-reader")
    task = asyncio.create_task(follower.run(inbox))
    try:
        yield
    finally:
        await follower.stop()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_forged_bound_record_for_a_pod_that_never_existed_gets_a_tombstone_at_the_next_relist(
    own_broker: str, inbox: Inbox
) -> None:
    """Compacted, a forged "bound" would hold its devices in every placer forever (issue 15, #8)."""
    forged_uid = f"forged-{uuid.uuid4().hex[:8]}"
    forged = PodLifecycleEvent(
        uid=forged_uid,
        namespace="default",
        name="never-existed",
        phase=LifecyclePhase.BOUND,
        node="e2e-node-1",
        devices=tuple(DeviceAssignment(index=i) for i in range(8)),
    )
    async with KubeApiServer() as api:
        settings = Settings(
            kafka_bootstrap=own_broker, kube_api_url=api.url, health_port=0, decision_key=TEST_KEY_SECRET
        )
        real = api.store.create(
            "pods", {**pod_json("e2e-real", node="e2e-node-1"), "metadata": {"name": "e2e-real"}}, namespace="default"
        )
        real_uid = real["metadata"]["uid"]
        watcher = Watcher(settings, resync_seconds=0.5)
        try:
            await inbox.wait_for(is_event(PodLifecycleEvent, uid=real_uid, phase=LifecyclePhase.BOUND))
            async with EventProducer(own_broker, service="forger") as forger:
                await forger.send(topics.PODS_LIFECYCLE, forged_uid, forged)
            await inbox.wait_for(lambda m: m.key == forged_uid and m.event is None)
        finally:
            await watcher.close()
    on_topic = [m for m in inbox.messages if m.topic == topics.PODS_LIFECYCLE.name]
    assert not any(m.key == real_uid and m.event is None for m in on_topic)  # the listed pod keeps its record
