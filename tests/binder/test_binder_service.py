"""The binder service on the real broker and the test API server: run_binder and `topoplace binder`."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import msgspec
import pytest
from aiokafka import AIOKafkaProducer
from binder_support import placement_for
from decision_keys import TEST_KEY, TEST_KEY_SECRET

from schemas import annotations as pod_annotations
from schemas import topics
from schemas.events import (
    BindingOutcome,
    DeadLetterEvent,
    DeviceAssignment,
    GangPlacementEvent,
    LifecyclePhase,
    NodeTopologyEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from schemas.seal import SEAL
from schemas.topology import Device, Vendor
from services.binder.retry import BackoffPolicy
from services.binder.service import run_binder
from topoplace.config import Settings
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

WAIT = 30.0  # seconds; generous for 2 shared cores, met in well under a second when things work
PLACEMENTS_DLQ = topics.Topic(name=topics.PLACEMENTS.dlq, event=DeadLetterEvent, key="original key", compacted=False)


class Collected:
    """Messages of a topic as they arrive, grouped by a key of the event; wait for a count."""

    def __init__(self, key_of: Callable[[Any], str]) -> None:
        self.by_key: dict[str, list[Any]] = collections.defaultdict(list)
        self._key_of = key_of
        self._changed = asyncio.Condition()

    async def __call__(self, message: Received) -> None:
        if message.event is None:
            return
        async with self._changed:
            self.by_key[self._key_of(message.event)].append(message.event)
            self._changed.notify_all()

    async def wait_for(self, key: str, count: int = 1) -> list[Any]:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.by_key[key]) >= count), WAIT)
            return list(self.by_key[key])


@pytest.fixture
async def producer(kafka_bootstrap: str) -> AsyncIterator[EventProducer]:
    async with EventProducer(kafka_bootstrap, service="binder-test") as events_producer:
        yield events_producer


async def follow(
    kafka_bootstrap: str, topic: topics.Topic, key_of: Callable[[Any], str]
) -> tuple[Collected, Callable[[], Awaitable[None]]]:
    collected = Collected(key_of)
    follower = TopicFollower(kafka_bootstrap, [topic], service="binder-test")
    task = asyncio.create_task(follower.run(collected))

    async def stop() -> None:
        await follower.stop()
        await asyncio.gather(task, return_exceptions=True)

    return collected, stop


@pytest.fixture
async def outcomes(kafka_bootstrap: str) -> AsyncIterator[Collected]:
    collected, stop = await follow(kafka_bootstrap, topics.BINDINGS, lambda e: e.uid)
    yield collected
    await stop()


StartBinder = Callable[[], Awaitable[None]]


@pytest.fixture
async def start_binder(kafka_bootstrap: str, kube_api: KubeApiServer) -> AsyncIterator[StartBinder]:
    """Starts run_binder in this loop (once); stops it after the test and checks it stopped cleanly."""
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    settings = Settings(
        kafka_bootstrap=kafka_bootstrap,
        kube_api_url=kube_api.url,
        consumer_group_prefix=f"binder-test-{uuid.uuid4().hex[:8]}",
        health_port=0,
        decision_key=TEST_KEY_SECRET,
    )

    async def start() -> None:
        policy = BackoffPolicy(base_seconds=0.01, cap_seconds=0.1)
        tasks.append(asyncio.create_task(run_binder(settings, stop=stop, policy=policy)))

    yield start
    stop.set()
    for task in tasks:
        await asyncio.wait_for(task, WAIT)  # raises if the service failed


def gpus(count: int) -> tuple[Device, ...]:
    return tuple(
        Device(index=i, uuid=f"GPU-{i}", vendor=Vendor.NVIDIA, model="H100", memory_mib=80_000) for i in range(count)
    )


def node_object(kube_api: KubeApiServer, name: str, gpu_count: int) -> None:
    """The Node object a kubelet registers: the binder checks device indices against its allocatable."""
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpu_count)}
    body = {"metadata": {"name": name}, "status": {"capacity": allocatable, "allocatable": allocatable}}
    kube_api.store.create("nodes", body)


async def new_node(kube_api: KubeApiServer, producer: EventProducer, name: str, gpu_count: int) -> None:
    """The Node object and the topology its agent publishes (the binder checks each device's UUID)."""
    node_object(kube_api, name, gpu_count)
    topology = NodeTopologyEvent(node=name, machine_type="test", devices=gpus(gpu_count))
    await producer.send(topics.TOPOLOGY_NODES, name, topology)


def new_pod(kube_api: KubeApiServer) -> dict[str, Any]:
    body = {
        "metadata": {"name": f"pod-{uuid.uuid4().hex[:8]}", "namespace": "default"},
        "spec": {"schedulerName": "topoplace", "containers": [{"name": "c", "image": "i"}]},
    }
    return kube_api.store.create("pods", body, namespace="default")


async def test_binds_through_kafka_with_the_ledger_rebuilt_from_the_topics(
    kube_api: KubeApiServer,
    producer: EventProducer,
    outcomes: Collected,
    start_binder: StartBinder,
) -> None:
    node = f"node-{uuid.uuid4().hex[:8]}"
    await new_node(kube_api, producer, node, 2)
    # Before the binder starts: the node's devices, and another pod bound there, holding device 0.
    await producer.send(topics.TOPOLOGY_NODES, node, NodeTopologyEvent(node=node, machine_type="test", devices=gpus(2)))
    running = new_pod(kube_api)
    kube_api.store.bind("default", running["metadata"]["name"], {"metadata": {}, "target": {"name": node}})
    holder = PodLifecycleEvent(
        uid=running["metadata"]["uid"],
        namespace="default",
        name=running["metadata"]["name"],
        phase=LifecyclePhase.BOUND,
        node=node,
        devices=(DeviceAssignment(index=0),),
    )
    await producer.send(topics.PODS_LIFECYCLE, holder.uid, holder)
    await start_binder()

    blocked, free = new_pod(kube_api), new_pod(kube_api)
    on_taken = placement_for(blocked, node, (DeviceAssignment(index=0),))
    on_free = placement_for(free, node, (DeviceAssignment(index=1),))
    for placement in (on_taken, on_free, on_free):  # the last one is a duplicated message
        await producer.send(topics.PLACEMENTS, node, placement)

    (conflict,) = await outcomes.wait_for(on_taken.uid)
    assert conflict.outcome is BindingOutcome.CONFLICT
    assert holder.uid in conflict.reason
    assert not kube_api.store.get("pods", blocked["metadata"]["name"], "default")["spec"].get("nodeName")

    first, second = await outcomes.wait_for(on_free.uid, 2)
    assert (first.outcome, second.outcome) == (BindingOutcome.BOUND, BindingOutcome.BOUND)
    bound = kube_api.store.get("pods", free["metadata"]["name"], "default")
    assert bound["spec"]["nodeName"] == node
    assert pod_annotations.decode_devices(bound["metadata"]["annotations"][pod_annotations.DEVICES]) == on_free.devices
    events, _ = kube_api.store.list("events", "default")
    scheduled = [e for e in events if e["involvedObject"]["uid"] == on_free.uid and e["reason"] == "Scheduled"]
    assert len(scheduled) == 1  # bound once


async def test_undecodable_placement_goes_to_the_dlq_and_the_next_one_binds(
    kafka_bootstrap: str,
    kube_api: KubeApiServer,
    producer: EventProducer,
    outcomes: Collected,
    start_binder: StartBinder,
) -> None:
    node = f"node-{uuid.uuid4().hex[:8]}"
    await new_node(kube_api, producer, node, 1)
    dead, stop_dlq = await follow(kafka_bootstrap, PLACEMENTS_DLQ, lambda e: e.key or "")
    try:
        pod = new_pod(kube_api)
        good = placement_for(pod, node)
        future_version = {**_as_json(good), "schema_version": 99}
        raw = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await raw.start()
        try:
            # Same key, so the same partition: the bad ones come first, in order.
            await raw.send_and_wait(topics.PLACEMENTS.name, b"{not json", key=node.encode())
            await raw.send_and_wait(topics.PLACEMENTS.name, json.dumps(future_version).encode(), key=node.encode())
        finally:
            await raw.stop()
        await producer.send(topics.PLACEMENTS, node, good)
        await start_binder()

        (outcome,) = await outcomes.wait_for(good.uid)
        assert outcome.outcome is BindingOutcome.BOUND
        assert kube_api.store.get("pods", pod["metadata"]["name"], "default")["spec"]["nodeName"] == node
        rejected = await dead.wait_for(node, 2)
        assert [r.value for r in rejected] == ["{not json", json.dumps(future_version)]
        assert all(r.error and r.topic == topics.PLACEMENTS.name for r in rejected)
        assert "schema_version" in rejected[1].error
    finally:
        await stop_dlq()


def _as_json(placement: Any) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(msgspec.json.encode(placement))
    return decoded


async def test_binder_command_is_ready_then_stops_on_sigterm(kafka_bootstrap: str, kube_api: KubeApiServer) -> None:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": kafka_bootstrap,
        "TOPOPLACE_KUBE_API_URL": kube_api.url,
        "TOPOPLACE_GROUP_PREFIX": f"binder-cli-{uuid.uuid4().hex[:8]}",
        "TOPOPLACE_HEALTH_PORT": "0",
        "TOPOPLACE_KAFKA_IDEMPOTENCE": "false",
        "TOPOPLACE_DECISION_KEY": TEST_KEY_SECRET.reveal(),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "topoplace.cli",
        "binder",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    drain: asyncio.Task[bytes] | None = None
    try:
        port = await _health_port_once_ready(process)
        assert process.stderr is not None
        drain = asyncio.create_task(process.stderr.read())  # keeps the pipe from filling up and blocking it
        async with aiohttp.ClientSession() as session:
            for path in ("/healthz", "/readyz"):
                async with session.get(f"http://127.0.0.1:{port}{path}") as reply:
                    assert reply.status == 200, path
            async with session.get(f"http://127.0.0.1:{port}/metrics") as reply:
                assert "topoplace_binder_binds_total" in await reply.text()
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), WAIT) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        if drain is not None:
            await drain


async def _health_port_once_ready(process: asyncio.subprocess.Process) -> int:
    """Reads the JSON log lines until the ledger is ready; returns the health port logged at start."""
    assert process.stderr is not None
    port = None

    async def read() -> int:
        nonlocal port
        while line := await process.stderr.readline():  # type: ignore[union-attr]
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == "binder.started":
                port = int(record["health_port"])
            if record.get("event") == "binder.ledger_ready":
                assert port is not None
                return port
        raise AssertionError(f"the binder exited ({await process.wait()}) before it was ready")

    return await asyncio.wait_for(read(), WAIT)


async def test_gang_decision_through_kafka_binds_every_member(
    kube_api: KubeApiServer, producer: EventProducer, outcomes: Collected, start_binder: StartBinder
) -> None:
    node = f"node-{uuid.uuid4().hex[:8]}"
    await new_node(kube_api, producer, node, 4)
    pods = [new_pod(kube_api) for _ in range(3)]
    members = tuple(placement_for(pod, node, (DeviceAssignment(index=i),)) for i, pod in enumerate(pods))
    gang = GangPlacementEvent(
        decision_id="g-1", name="default/job", namespace="default", outcome=PlacementOutcome.PLACED, members=members
    )
    await start_binder()
    await producer.send(topics.GANG_PLACEMENTS, gang.name, gang)
    for member in members:
        (outcome,) = await outcomes.wait_for(member.uid)
        assert outcome.outcome is BindingOutcome.BOUND
        assert kube_api.store.get("pods", member.name, "default")["spec"]["nodeName"] == node


async def test_a_forged_lifecycle_delete_on_the_topic_frees_nothing_at_start(
    kube_api: KubeApiServer, producer: EventProducer, outcomes: Collected, start_binder: StartBinder
) -> None:
    node = f"node-{uuid.uuid4().hex[:8]}"
    await new_node(kube_api, producer, node, 2)
    running = new_pod(kube_api)
    name, uid = running["metadata"]["name"], running["metadata"]["uid"]
    devices = (DeviceAssignment(index=0),)
    notes = {
        pod_annotations.DEVICES: pod_annotations.encode_devices(devices),
        SEAL: TEST_KEY.seal(uid, node, "d", devices),
    }
    kube_api.store.bind("default", name, {"metadata": {"uid": uid, "annotations": notes}, "target": {"name": node}})
    forged = PodLifecycleEvent(uid=uid, namespace="default", name=name, phase=LifecyclePhase.DELETED)
    await producer.send(topics.PODS_LIFECYCLE, uid, forged)
    await start_binder()

    taker = new_pod(kube_api)
    placement = placement_for(taker, node, (DeviceAssignment(index=0),))
    await producer.send(topics.PLACEMENTS, node, placement)
    (outcome,) = await outcomes.wait_for(placement.uid)
    assert outcome.outcome is BindingOutcome.CONFLICT
    assert uid in outcome.reason  # still held by the running pod the forged event named
    assert not kube_api.store.get("pods", taker["metadata"]["name"], "default")["spec"].get("nodeName")


async def test_a_forged_lifecycle_bound_for_a_pod_that_never_existed_holds_nothing(
    kube_api: KubeApiServer, producer: EventProducer, outcomes: Collected, start_binder: StartBinder
) -> None:
    """Compacted, such a record was replayed on every start and held its devices forever (issue 15, #8)."""
    node = f"node-{uuid.uuid4().hex[:8]}"
    await new_node(kube_api, producer, node, 2)
    ghost = f"ghost-{uuid.uuid4().hex[:8]}"
    forged = PodLifecycleEvent(
        uid=ghost,
        namespace="default",
        name=ghost,
        phase=LifecyclePhase.BOUND,
        node=node,
        devices=(DeviceAssignment(index=0), DeviceAssignment(index=1)),
    )
    await producer.send(topics.PODS_LIFECYCLE, ghost, forged)
    await start_binder()

    taker = new_pod(kube_api)
    placement = placement_for(taker, node, (DeviceAssignment(index=0), DeviceAssignment(index=1)))
    await producer.send(topics.PLACEMENTS, node, placement)
    (outcome,) = await outcomes.wait_for(placement.uid)
    assert outcome.outcome is BindingOutcome.BOUND, outcome.reason
    assert kube_api.store.get("pods", taker["metadata"]["name"], "default")["spec"]["nodeName"] == node


async def test_the_binder_goes_on_binding_after_its_broker_restarted_empty(kube_api: KubeApiServer) -> None:
    port = free_port()
    first, second = EmbeddedBroker(port=port), EmbeddedBroker(port=port)
    await first.start()
    await ensure_topics(first.bootstrap)
    stop = asyncio.Event()
    settings = Settings(
        kafka_bootstrap=first.bootstrap, kube_api_url=kube_api.url, health_port=0, decision_key=TEST_KEY_SECRET
    )
    node_object(kube_api, "n1", 4)  # placements without devices: no topology to wait for after the restart
    binder = asyncio.create_task(run_binder(settings, stop=stop, policy=BackoffPolicy(base_seconds=0.01)))
    try:
        async with EventProducer(first.bootstrap, service="binder-test") as producer:
            before = new_pod(kube_api)
            bound, stop_following = await follow(first.bootstrap, topics.BINDINGS, lambda e: e.uid)
            await producer.send(topics.PLACEMENTS, "n1", placement_for(before, "n1", ()))
            await bound.wait_for(before["metadata"]["uid"])
            await stop_following()
        first.kill_now()  # as SIGKILL: the in-memory topics are gone
        await second.start()
        await ensure_topics(second.bootstrap)
        async with EventProducer(second.bootstrap, service="binder-test") as producer:
            after = new_pod(kube_api)
            bound, stop_following = await follow(second.bootstrap, topics.BINDINGS, lambda e: e.uid)
            await producer.send(topics.PLACEMENTS, "n1", placement_for(after, "n1", ()))
            (outcome,) = await bound.wait_for(after["metadata"]["uid"])
            await stop_following()
        assert outcome.outcome is BindingOutcome.BOUND
        assert not binder.done()
    finally:
        stop.set()
        await asyncio.wait_for(binder, WAIT)
        first.kill_now()
        await second.stop()


def test_the_binder_without_the_seals_key_stops_at_once_naming_the_setting() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOPLACE_DECISION_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "topoplace.cli", "binder"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("topoplace binder: TOPOPLACE_DECISION_KEY_FILE: is required")
