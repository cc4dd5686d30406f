"""One runtime for every service: `run_service(spec)`.

A service declares what one run of its body is (`ServiceRun`): stages of extra loops
(leadership, API watches) and state topics to follow, each stage with the gates that must
pass before the next starts; then the work topic and its handler, with the loops that run
beside the work (the placer's retry tick) and a fence (the binder's Lease: the work runs only
while it is held). The runtime does the rest, the same way for every service: logging and
tracing, which Kafka (`kafka_bootstrap`), the health server and its readiness reason, the
topics and a producer per run, a supervisor that starts the body over after a Kafka outage,
and cancellation in one place: on stop, on a loop's end or failure, the fence's guard first,
then the consumer and the followers, then the service's own closing, then every loop in the
reverse order of its start (a Lease is given back last).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import msgspec

from schemas.topics import Topic
from topoplace import telemetry
from topoplace.config import Settings
from topoplace.health import HealthServer
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.bootstrap import kafka_bootstrap
from topoplace.kafka.consumer import EventConsumer
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Handler
from topoplace.logs import configure_logging
from topoplace.supervise import Supervisor, is_transient_outage

log = logging.getLogger(__name__)


async def _nothing() -> None:
    return None


class Loop(msgspec.Struct, frozen=True):
    """A coroutine that runs as long as the body does (a watch, a Lease, a tick); its end ends the run."""

    name: str
    run: Callable[[], Coroutine[Any, Any, None]]


class Gate(msgspec.Struct, frozen=True, kw_only=True):
    """An event the body waits for before its next stage. `ready`: whether /readyz waits for it too."""

    name: str  # what the service waits for, as /readyz says it
    passed: asyncio.Event
    ready: bool = True
    waiting: Callable[[], str] | None = None  # how far it is, for /readyz (else "waiting for <name>")


class Follow(msgspec.Struct, frozen=True, kw_only=True):
    """State topics read from offset 0 by a follower; the stage waits until it has caught up."""

    topics: tuple[Topic, ...]
    handler: Handler


class Stage(msgspec.Struct, frozen=True, kw_only=True):
    """Loops started together (and a follower), then the gates they must pass before the next stage."""

    loops: tuple[Loop, ...] = ()
    follow: Follow | None = None
    gates: tuple[Gate, ...] = ()


class Fence(msgspec.Struct, frozen=True, kw_only=True):
    """The work runs only while something is held (a Lease): `guard(work)` ends the work once `lost` is set."""

    lost: asyncio.Event
    guard: Callable[[asyncio.Task[None]], Coroutine[Any, Any, None]]


class Work(msgspec.Struct, frozen=True, kw_only=True):
    """The work topics, read as a member of the service's consumer group, and what runs beside them."""

    topics: tuple[Topic, ...]
    handler: Handler
    concurrency: int = 1
    ready_when_joined: bool = True  # /readyz waits for the group too (a standby binder is ready without it)
    loops: tuple[Loop, ...] = ()
    fence: Fence | None = None


class ServiceRun(msgspec.Struct, frozen=True, kw_only=True):
    """One run of a service's body, built afresh (empty state) by each start of its supervisor."""

    stages: tuple[Stage, ...] = ()
    work: Work | None = None
    working: Callable[[], None] = lambda: None  # every gate passed: the work starts now
    # A dependency besides Kafka that does not answer now (the API server), named with why; the
    # service is not ready meanwhile. None: everything answers.
    unavailable: Callable[[], str | None] = lambda: None
    closing: Callable[[], Awaitable[None]] = _nothing  # after the streams stopped: flush what is in flight


class RunContext(msgspec.Struct, frozen=True, kw_only=True):
    """What `ServiceSpec.build` gets for one run."""

    settings: Settings
    bootstrap: str
    producer: EventProducer
    stop: asyncio.Event


class ServiceSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A service as the runtime runs it."""

    name: str  # the service name of logs, traces, metrics and its consumer group
    log_name: str  # the prefix of its own log events (`<log_name>.started`, `.stopped`)
    settings: Settings
    build: Callable[[RunContext], Awaitable[ServiceRun]]
    stop: asyncio.Event | None = None
    started_fields: dict[str, Any] = {}


async def run_service(spec: ServiceSpec) -> None:
    """Run the service until its `stop` is set; a failure other than a Kafka outage is raised."""
    settings = spec.settings
    configure_logging(spec.name, settings.log_level)
    telemetry.setup_tracing(spec.name, settings)
    stop = spec.stop if spec.stop is not None else asyncio.Event()
    supervisor = Supervisor(spec.name, stop=stop)
    current: list[_Body] = []  # the body that runs now

    def not_ready_reason() -> str:
        # What fails now comes first: a body started over after the API server went away may
        # already say it is still away, while the last problem only says why it started over.
        away = current[-1].run_spec.unavailable() if current else None
        if away is not None:
            return away
        if supervisor.problem is not None:
            return f"{supervisor.problem} (reconnecting)"
        return current[-1].waiting_reason() if current else "connecting to Kafka"

    try:
        async with kafka_bootstrap(settings, create_topics=False) as bootstrap:
            health = HealthServer(
                settings.health_port, ready=lambda: bool(current) and current[-1].ready(), reason=not_ready_reason
            )
            port = await health.start()
            fields = {**spec.started_fields, "health_port": port, "bootstrap": bootstrap}
            log.info(f"{spec.log_name}.started", extra={"fields": fields})
            try:
                await supervisor.run("streams", lambda: _run_body(spec, bootstrap, stop, supervisor, current))
            finally:
                current.clear()
                await health.stop()
                log.info(f"{spec.log_name}.stopped", extra={"fields": {}})
    finally:
        telemetry.shutdown_tracing()  # flush: the last spans are in the file


async def _run_body(
    spec: ServiceSpec, bootstrap: str, stop: asyncio.Event, supervisor: Supervisor, current: list[_Body]
) -> None:
    """One run, from a fresh connection: the topics (a broker back empty gets them again), a producer, the body."""
    settings = spec.settings
    current.clear()
    await ensure_topics(bootstrap, security=settings.kafka_security, durability=settings.topic_durability)
    async with EventProducer(
        bootstrap, service=spec.name, idempotence=settings.kafka_idempotence, security=settings.kafka_security
    ) as producer:
        run = await spec.build(RunContext(settings=settings, bootstrap=bootstrap, producer=producer, stop=stop))
        body = _Body(spec, run, bootstrap, producer)
        current.append(body)
        await body.run(stop, supervisor)


class _Body:
    """The tasks of one run, and the one place where they are stopped."""

    def __init__(self, spec: ServiceSpec, run: ServiceRun, bootstrap: str, producer: EventProducer) -> None:
        self.spec = spec
        self.run_spec = run
        security = spec.settings.kafka_security
        self.followers = {
            id(stage): TopicFollower(
                bootstrap, stage.follow.topics, service=spec.name, producer=producer, security=security
            )
            for stage in run.stages
            if stage.follow is not None
        }
        self.consumer: EventConsumer | None = None
        if run.work is not None:
            self.consumer = EventConsumer(
                bootstrap,
                run.work.topics,
                group_id=spec.settings.group_id(spec.name),
                service=spec.name,
                producer=producer,
                concurrency=run.work.concurrency,
                security=security,
            )
        self.tasks: list[asyncio.Task[None]] = []  # in the order started
        self.guard: asyncio.Task[None] | None = None

    def _gates(self) -> list[tuple[Gate, TopicFollower | None]]:
        gates: list[tuple[Gate, TopicFollower | None]] = []
        for stage in self.run_spec.stages:
            follower = self.followers.get(id(stage))
            if follower is not None:
                gates.append((Gate(name="caught_up", passed=follower.caught_up), follower))
            gates.extend((gate, None) for gate in stage.gates)
        return gates

    def ready(self) -> bool:
        if self.run_spec.unavailable() is not None:
            return False
        if not all(gate.passed.is_set() for gate, _ in self._gates() if gate.ready):
            return False
        work = self.run_spec.work
        return (
            work is None or not work.ready_when_joined or (self.consumer is not None and self.consumer.started.is_set())
        )

    def waiting_reason(self) -> str:
        for gate, follower in self._gates():
            if gate.ready and not gate.passed.is_set():
                if follower is not None:
                    return follower.waiting_reason() or f"waiting for {gate.name}"
                return gate.waiting() if gate.waiting is not None else f"waiting for {gate.name}"
        work = self.run_spec.work
        if work is not None and self.consumer is not None and not self.consumer.started.is_set():
            return f"joining the consumer group of {', '.join(t.name for t in work.topics)}"
        return "ready"

    def _start(self, loop: Loop) -> None:
        self.tasks.append(asyncio.create_task(loop.run(), name=f"{self.spec.log_name}-{loop.name}"))

    async def run(self, stop: asyncio.Event, supervisor: Supervisor) -> None:
        stopped = asyncio.create_task(stop.wait())
        try:
            if await self._through_stages(stopped):
                supervisor.running()
                self.run_spec.working()
                self._start_work()
                await asyncio.wait({stopped, *self.tasks}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            await self._stop()

    async def _through_stages(self, stopped: asyncio.Task[bool]) -> bool:
        """Each stage's loops and follower started, its gates passed; False when stopped or a loop ended first."""
        for stage in self.run_spec.stages:
            for loop in stage.loops:
                self._start(loop)
            events = [gate.passed for gate in stage.gates]
            follower = self.followers.get(id(stage))
            if follower is not None and stage.follow is not None:
                self._start(Loop("follower", _bound(follower.run, stage.follow.handler)))
                events.append(follower.caught_up)
            if events and not await _until(stopped, self.tasks, events):
                return False
        return True

    def _start_work(self) -> None:
        work = self.run_spec.work
        if work is None or self.consumer is None:
            return
        self._start(Loop("work", _bound(self.consumer.run, work.handler)))
        consumer_task = self.tasks[-1]
        if work.fence is not None:
            self.guard = asyncio.create_task(work.fence.guard(consumer_task), name=f"{self.spec.log_name}-fence")
        for loop in work.loops:
            self._start(loop)

    async def _stop(self) -> None:
        """Cancellation in one place: the fence's guard, the streams, the service's closing, then every loop."""
        fence = self.run_spec.work.fence if self.run_spec.work is not None else None
        if self.guard is not None and fence is not None and fence.lost.is_set():
            await self.guard  # the work in flight is ended before anything else
        if self.consumer is not None:
            await self.consumer.stop()
        for follower in self.followers.values():
            await follower.stop()
        await self.run_spec.closing()
        guard = [self.guard] if self.guard is not None else []
        await _reap([*guard, *reversed(self.tasks)])


def _bound(
    run: Callable[[Handler], Coroutine[Any, Any, None]], handler: Handler
) -> Callable[[], Coroutine[Any, Any, None]]:
    return lambda: run(handler)


async def _until(stopped: asyncio.Task[bool], loops: Sequence[asyncio.Task[None]], events: list[asyncio.Event]) -> bool:
    """Wait for every event; False when the service stops or a loop ends first."""
    waiting: asyncio.Future[list[bool]] = asyncio.gather(*(event.wait() for event in events))
    try:
        watched: set[asyncio.Future[Any]] = {stopped, waiting, *loops}
        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        return waiting.done() and not stopped.done() and not any(t.done() for t in loops)
    finally:
        if not waiting.done():
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)


async def _reap(tasks: Sequence[asyncio.Task[None]]) -> None:
    """Cancel the loops in this order and wait for each; the first that died of an error is raised."""
    failed: BaseException | None = None
    for task in tasks:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception as exc:
                if is_transient_outage(exc):  # the supervisor starts the body over
                    log.info("service.loop_ended", extra={"fields": {"loop": task.get_name(), "error": repr(exc)}})
                else:
                    log.error("service.loop_failed", exc_info=exc, extra={"fields": {"loop": task.get_name()}})
                failed = failed or exc
    if failed is not None:
        raise failed
