"""Kafka-side helpers of the placer's service tests: record topics, run placers, a fake binder."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Self

from scripted_engine import PlaceFn, ScriptedEngine

from schemas import topics
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    LifecyclePhase,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from services.placer.service import run_placer
from topoplace.config import Settings
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

TIMEOUT_S = 30.0


class Recorder:
    """Everything that arrives on some topics, with a way to wait for a condition on it."""

    def __init__(self, bootstrap: str, watched: Sequence[topics.Topic]) -> None:
        self.messages: list[Received] = []
        self._changed = asyncio.Condition()
        self._follower = TopicFollower(bootstrap, watched, service="placer-test-recorder")
        self._task: asyncio.Task[None] | None = None

    async def _record(self, received: Received) -> None:
        async with self._changed:
            self.messages.append(received)
            self._changed.notify_all()

    def on(self, topic: topics.Topic | str) -> list[Received]:
        name = topic if isinstance(topic, str) else topic.name
        return [m for m in self.messages if m.topic == name]

    def placements(self) -> list[PlacementEvent]:
        return [m.event for m in self.on(topics.PLACEMENTS) if isinstance(m.event, PlacementEvent)]

    async def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(condition)

        try:
            await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._follower.run(self._record))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._follower.stop(grace=2.0)
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class RunningPlacer:
    def __init__(self, task: asyncio.Task[None], stop: asyncio.Event) -> None:
        self.task = task
        self.stop = stop

    async def shut_down(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, TIMEOUT_S)


def placer_settings(bootstrap: str, **fields: object) -> Settings:
    return Settings(kafka_bootstrap=bootstrap, consumer_group_prefix="placer-test", **fields)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def placer(settings: Settings, place: PlaceFn) -> AsyncIterator[RunningPlacer]:
    stop = asyncio.Event()
    running = RunningPlacer(asyncio.create_task(run_placer(settings, stop=stop, engine=ScriptedEngine(place))), stop)
    try:
        yield running
    finally:
        if not running.task.done():
            await running.shut_down()


class FakeBinder:
    """Binds what the placements say, as the binder's ledger would: first decision on a device wins.

    Answers BOUND (and publishes the pod's lifecycle BOUND, as the watcher
    would) or CONFLICT when a device is already held by another pod.
    """

    def __init__(self, bootstrap: str) -> None:
        self.holder: dict[tuple[str, int], str] = {}  # (node, device index) -> pod uid
        self.bound: dict[str, PlacementEvent] = {}  # pod uid -> the decision it was bound by
        self.conflicts = 0
        self._producer = EventProducer(bootstrap, service="placer-test-binder")
        self._follower = TopicFollower(bootstrap, [topics.PLACEMENTS], service="placer-test-binder")
        self._task: asyncio.Task[None] | None = None

    async def _bind(self, received: Received) -> None:
        placement = received.event
        if not isinstance(placement, PlacementEvent) or placement.outcome is not PlacementOutcome.PLACED:
            return
        already = self.bound.get(placement.uid)
        shares = [(placement.node, d.index) for d in placement.devices]
        if already is not None:
            outcome = BindingOutcome.BOUND if already.node == placement.node else BindingOutcome.CONFLICT
        elif any(self.holder.get(s, placement.uid) != placement.uid for s in shares):
            outcome = BindingOutcome.CONFLICT
        else:
            outcome = BindingOutcome.BOUND
            self.bound[placement.uid] = placement
            self.holder.update(dict.fromkeys(shares, placement.uid))
        self.conflicts += outcome is BindingOutcome.CONFLICT
        await self._producer.send(
            topics.BINDINGS,
            placement.uid,
            BindingEvent(
                decision_id=placement.decision_id,
                uid=placement.uid,
                namespace=placement.namespace,
                name=placement.name,
                outcome=outcome,
                node=placement.node,
                devices=placement.devices,
            ),
        )
        if outcome is BindingOutcome.BOUND and already is None:
            await self._producer.send(
                topics.PODS_LIFECYCLE,
                placement.uid,
                PodLifecycleEvent(
                    uid=placement.uid,
                    namespace=placement.namespace,
                    name=placement.name,
                    phase=LifecyclePhase.BOUND,
                    node=placement.node,
                    devices=placement.devices,
                ),
            )

    async def __aenter__(self) -> Self:
        await self._producer.start()
        self._task = asyncio.create_task(self._follower.run(self._bind))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._follower.stop(grace=2.0)
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._producer.stop()
