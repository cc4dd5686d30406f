"""The real services of the pipeline, run in-process as asyncio tasks, and what they report.

`Pipeline` starts and stops the cluster watcher, the node-agent fleet, the
placer and the binder (each with its own stop Event and health port) and
follows `placements` and `bindings` into `Outcomes`, which tests wait on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from e2e_cluster import CLUSTER, fleet
from opentelemetry import trace

from engine import Engine
from schemas import topics
from schemas.events import BindingEvent, BindingOutcome, DeadLetterEvent, Event, PlacementEvent
from schemas.topics import Topic
from services.binder.service import SERVICE as BINDER
from services.binder.service import run_binder
from services.collector.cluster.service import run_cluster_watcher
from services.collector.node.fleet import run_fleet
from services.placer.service import SERVICE as PLACER
from services.placer.service import run_placer
from topoplace.config import Settings
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

SERVICE = "topoplace-e2e"  # the client id of the tests' own readers and writers
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def trace_id_of(received: Received) -> str:
    """The trace a message belongs to (its traceparent header), "" when it carries none."""
    span_context = trace.get_current_span(received.trace_context).get_span_context()
    return f"{span_context.trace_id:032x}" if span_context.is_valid else ""


async def log_ends(bootstrap: str, topics_: Sequence[Topic]) -> dict[TopicPartition, int]:
    """The offset after the last record of every partition, read, not asked for.

    The embedded broker (Tansu 0.6) answers ListOffsets(latest) with the base
    offset of the last record batch + 1, short of the end when that batch holds
    several records; so the tail is read from there to where it really ends.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
    await consumer.start()
    try:
        await consumer.topics()  # loads the partitions of every topic
        partitions = [
            TopicPartition(t.name, p) for t in topics_ for p in sorted(consumer.partitions_for_topic(t.name) or ())
        ]
        ends = dict(await consumer.end_offsets(partitions))
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, max(ends[tp] - 1, 0))
        while batches := await consumer.getmany(timeout_ms=100):
            for tp, records in batches.items():
                ends[tp] = max(ends[tp], records[-1].offset + 1)
        return ends
    finally:
        await consumer.stop()


async def dead_letters(bootstrap: str, topic: Topic) -> list[DeadLetterEvent]:
    """Every DeadLetterEvent on `topic`'s DLQ, read to its real end (see log_ends)."""
    dlq = Topic(name=topic.dlq, event=DeadLetterEvent, key="the original key", compacted=False)
    ends = await log_ends(bootstrap, [dlq])
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
    await consumer.start()
    letters = []
    try:
        consumer.assign(list(ends))
        await consumer.seek_to_beginning(*ends)
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                letters += [msgspec.json.decode(r.value, type=DeadLetterEvent) for r in records if r.value]
        return letters
    finally:
        await consumer.stop()


async def start_groups_at_end(bootstrap: str, groups: dict[str, list[Topic]]) -> None:
    """Commit each group's offsets at the current end of its topics.

    The topics hold what earlier tests left; a test's services start where a
    long-running deployment's would, at the end, and see only what the test
    sends them (the state topics are still read from the start, as always).
    """
    for group_id, group_topics in groups.items():
        ends = await log_ends(bootstrap, group_topics)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign(list(ends))
            await consumer.commit(ends)
        finally:
            await consumer.stop()


class Binding(msgspec.Struct, frozen=True, kw_only=True):
    event: BindingEvent
    trace_id: str


class Outcomes:
    """Every placement and binding outcome on the topics, by pod uid; waitable."""

    def __init__(self) -> None:
        self.placements: dict[str, list[PlacementEvent]] = {}
        self.bindings: dict[str, list[Binding]] = {}
        self.changed = asyncio.Condition()

    async def record(self, received: Received) -> None:
        event = received.event
        async with self.changed:
            if isinstance(event, PlacementEvent):
                self.placements.setdefault(event.uid, []).append(event)
            elif isinstance(event, BindingEvent):
                self.bindings.setdefault(event.uid, []).append(Binding(event=event, trace_id=trace_id_of(received)))
            self.changed.notify_all()

    def of(self, uid: str, outcome: BindingOutcome) -> list[Binding]:
        return [b for b in self.bindings.get(uid, []) if b.event.outcome is outcome]

    def bound(self, uid: str) -> Binding | None:
        found = self.of(uid, BindingOutcome.BOUND)
        return found[0] if found else None

    def settled(self, uid: str) -> bool:
        """Bound, or reported unschedulable with a reason: what no lost pod ends as."""
        if self.bound(uid) is not None:
            return True
        return any(b.event.reason for b in self.of(uid, BindingOutcome.UNSCHEDULABLE))

    def describe(self, uids: Sequence[str]) -> dict[str, list[str]]:
        """What the topics say of each pod, for failure messages."""
        return {
            uid: [
                f"placed {p.outcome.value} {p.node} {[d.index for d in p.devices]} {p.reason}"
                for p in self.placements.get(uid, [])
            ]
            + [f"binding {b.event.outcome.value} {b.event.node} {b.event.reason}" for b in self.bindings.get(uid, [])]
            for uid in uids
        }

    def placement(self, uid: str, decision_id: str) -> PlacementEvent | None:
        return next((p for p in self.placements.get(uid, []) if p.decision_id == decision_id), None)


class ServiceHandle:
    """One service running as a task, with the Event that asks it to stop."""

    def __init__(self, name: str, task: asyncio.Task[None], stop: asyncio.Event, health_port: int) -> None:
        self.name = name
        self.task = task
        self.stop = stop
        self.health_port = health_port
        self.stopping = False  # stopped on purpose: its end is no failure


class ServiceDied(AssertionError):
    pass


class Pipeline:
    def __init__(self, *, bootstrap: str, kube_api: KubeApiServer, run_id: str, traces_file: Path) -> None:
        self.bootstrap = bootstrap
        self.kube_api = kube_api
        self.run_id = run_id
        self.traces_file = traces_file
        self.decision_key = secrets.token_hex(32)  # this run's seal key, shared by every service it starts
        self.outcomes = Outcomes()
        self.services: list[ServiceHandle] = []
        self._follower = TopicFollower(bootstrap, [topics.PLACEMENTS, topics.BINDINGS], service=SERVICE)
        self._follower_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Pipeline:
        settings = self.settings()
        await start_groups_at_end(
            self.bootstrap,
            {
                settings.group_id(PLACER): [topics.PODS_PENDING, topics.GANGS_PENDING],
                settings.group_id(BINDER): [topics.PLACEMENTS, topics.GANG_PLACEMENTS],
            },
        )
        self._follower_task = asyncio.create_task(self._follower.run(self.outcomes.record), name="e2e-outcomes")
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.stop_all()
        finally:
            await self._follower.stop()
        if self._follower_task is not None:
            self._follower_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._follower_task

    # --- configuration ------------------------------------------------------------------------

    def settings(self, health_port: int = 0) -> Settings:
        env = {
            "KAFKA_BOOTSTRAP": self.bootstrap,
            "TOPOPLACE_KUBE_API_URL": self.kube_api.url,
            "TOPOPLACE_TRACES_FILE": str(self.traces_file),
            "TOPOPLACE_GROUP_PREFIX": self.run_id,
            "TOPOPLACE_DECISION_KEY": self.decision_key,
            "TOPOPLACE_HEALTH_PORT": str(health_port),
            "TOPOPLACE_LOG_LEVEL": os.environ.get("TOPOPLACE_LOG_LEVEL", "INFO"),
            # The embedded broker cannot serve an idempotent producer; an external Kafka keeps its default.
            "TOPOPLACE_KAFKA_IDEMPOTENCE": os.environ.get(
                "TOPOPLACE_KAFKA_IDEMPOTENCE", "true" if os.environ.get("KAFKA_BOOTSTRAP") else "false"
            ),
        }
        return Settings.from_env(env)

    async def produce(self, topic: Topic | str, key: str | None, *events: Event) -> None:
        """Events onto a topic, sent as any service sends them: all at once, so in one record batch."""
        idempotence = self.settings().kafka_idempotence
        async with EventProducer(self.bootstrap, service=SERVICE, idempotence=idempotence) as producer:
            await asyncio.gather(*(producer.send(topic, key, event) for event in events))

    # --- services -----------------------------------------------------------------------------

    def _start(self, name: str, run: Callable[[Settings, asyncio.Event], Coroutine[Any, Any, None]]) -> ServiceHandle:
        port = free_port()
        stop = asyncio.Event()
        task = asyncio.create_task(run(self.settings(port), stop), name=name)
        handle = ServiceHandle(name, task, stop, port)
        self.services.append(handle)
        return handle

    async def start_collectors(self) -> None:
        """The cluster watcher and the node agents; returns once both have published what they saw."""
        watcher = self._start(
            "cluster-watcher", lambda s, stop: run_cluster_watcher(s, resync_seconds=300.0, stop=stop)
        )
        agents = self._start(
            "node-agents", lambda s, stop: run_fleet(s, fleet(CLUSTER), interval_seconds=60.0, stop=stop)
        )
        await self.wait_ready(watcher)
        await self.wait_ready(agents)

    async def start_placer(self, engine: Engine | None = None) -> ServiceHandle:
        """`engine`: the placer's engine (a scripted one sees or times its decisions); None: its own."""
        placer = self._start("placer", lambda s, stop: run_placer(s, stop=stop, engine=engine))
        await self.wait_ready(placer)
        return placer

    async def start_binder(self) -> ServiceHandle:
        binder = self._start("binder", lambda s, stop: run_binder(s, stop=stop))
        await self.wait_ready(binder)
        return binder

    async def start_all(self) -> None:
        # The watcher first: its first list reports the pods of earlier tests as gone,
        # so the placer starts on a view where their devices are free again.
        await self.start_collectors()
        await self.start_placer()
        await self.start_binder()

    async def wait_ready(self, service: ServiceHandle, timeout: float = START_TIMEOUT_S) -> None:
        """Poll the service's /readyz, as a kubelet's readiness probe does."""
        url = f"http://127.0.0.1:{service.health_port}/readyz"
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as session:
            while True:
                self.raise_if_died()
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(url) as response:
                        if response.status == 200:
                            return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{service.name} not ready after {timeout:.0f} s")
                await asyncio.sleep(0.05)  # the probe's period

    async def stop(self, service: ServiceHandle, *, kill: bool = False) -> None:
        """Set its stop Event, or with kill cancel its task (no grace for the message in hand); wait for its end."""
        service.stopping = True
        if kill:
            service.task.cancel()
        else:
            service.stop.set()
        done, _ = await asyncio.wait({service.task}, timeout=STOP_TIMEOUT_S)
        if not done:
            service.task.cancel()
            await asyncio.wait({service.task})
            raise AssertionError(f"{service.name} did not stop within {STOP_TIMEOUT_S:.0f} s of its stop Event")
        if not kill and not service.task.cancelled() and service.task.exception() is not None:
            raise AssertionError(f"{service.name} failed while stopping") from service.task.exception()

    async def stop_all(self) -> None:
        """Every service still running, the last started first; their spans are in the file after."""
        for service in reversed(self.services):
            if not service.stopping:
                await self.stop(service)

    def raise_if_died(self) -> None:
        for service in self.services:
            if service.task.done() and not service.stopping:
                error = None if service.task.cancelled() else service.task.exception()
                raise ServiceDied(f"{service.name} ended on its own: {error!r}") from error

    # --- waiting ------------------------------------------------------------------------------

    async def wait_until(self, predicate: Callable[[Outcomes], bool], *, what: str, timeout: float = 30.0) -> None:
        """Until the outcomes satisfy `predicate`; fails early when a service dies."""

        async def satisfied() -> None:
            async with self.outcomes.changed:
                await self.outcomes.changed.wait_for(lambda: predicate(self.outcomes))

        await self._race(satisfied(), lambda: predicate(self.outcomes), what=what, timeout=timeout)

    async def wait_for_event(self, event: asyncio.Event, *, what: str, timeout: float = 30.0) -> None:
        """Until `event` is set; fails early when a service dies."""
        await self._race(event.wait(), event.is_set, what=what, timeout=timeout)

    async def _race(
        self, waiting: Coroutine[Any, Any, Any], met: Callable[[], bool], *, what: str, timeout: float
    ) -> None:
        """`waiting` against the running services' ends and the clock; `met` says whether it got there."""
        waiter = asyncio.ensure_future(waiting)
        running = {s.task for s in self.services if not s.stopping}
        try:
            await asyncio.wait({waiter, *running}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if met():
            return
        self.raise_if_died()
        raise TimeoutError(f"after {timeout:.0f} s still waiting for {what}")

    async def wait_bound(self, uids: Sequence[str], *, timeout: float = 30.0) -> None:
        """Until every pod is bound (a pod told why it waits, then placed, settles only here)."""
        try:
            await self.wait_until(
                lambda o: all(o.bound(uid) is not None for uid in uids), what=f"{len(uids)} pods bound", timeout=timeout
            )
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; {self.outcomes.describe(list(uids))}") from None

    async def wait_settled(self, uids: Sequence[str], *, timeout: float = 30.0) -> None:
        def all_settled(outcomes: Outcomes) -> bool:
            return all(outcomes.settled(uid) for uid in uids)

        try:
            await self.wait_until(all_settled, what=f"{len(uids)} pods bound or unschedulable", timeout=timeout)
        except TimeoutError as exc:
            raise TimeoutError(
                f"{exc}; unsettled: {self.outcomes.describe([u for u in uids if not self.outcomes.settled(u)])}"
            ) from None
