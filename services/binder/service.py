"""The binder service: wiring only.

Start-up order matters: tracing before the Kubernetes client (the aiohttp
instrumentation only reaches sessions created after it), and the device
ledger caught up with `pods.lifecycle` and `topology.nodes` before the first
placement is taken (a half-built ledger would let a device go out twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client

from schemas import topics
from services.binder.apply import PodBinder
from services.binder.handler import PlacementHandler
from services.binder.kube_events import EventRecorder
from services.binder.ledger import DeviceLedger
from services.binder.metrics import LEDGER_PODS
from services.binder.retry import DEFAULT_POLICY, BackoffPolicy
from topoplace import kube, telemetry
from topoplace.broker import ensure_topics, kafka_bootstrap
from topoplace.config import Settings
from topoplace.health import HealthServer
from topoplace.kafka_io import EventConsumer, EventProducer, Received, TopicFollower
from topoplace.logs import configure_logging
from topoplace.supervise import Supervisor

SERVICE = "topoplace-binder"
LEDGER_TOPICS = (topics.PODS_LIFECYCLE, topics.TOPOLOGY_NODES)

log = logging.getLogger(__name__)

# Messages of one partition handled at once: the handler's synchronous part runs in order,
# its API calls and produces overlap.
CONCURRENCY = 16


def ledger_feed(ledger: DeviceLedger) -> Callable[[Received], Awaitable[None]]:
    """The follower's handler: every ledger topic message goes into the ledger."""

    async def feed(message: Received) -> None:
        ledger.apply_message(message.topic, message.key, message.event)
        LEDGER_PODS.set(ledger.pod_count())

    return feed


async def run_binder(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    policy: BackoffPolicy = DEFAULT_POLICY,
) -> None:
    """Bind placements until `stop` is set (or a component fails for a reason other than Kafka, which is raised)."""
    configure_logging(SERVICE, settings.log_level)
    provider = telemetry.setup_tracing(SERVICE, settings)
    stop = stop or asyncio.Event()
    supervisor = Supervisor(SERVICE, stop=stop)
    current: list[TopicFollower] = []  # the ledger follower of the body that runs now

    def not_ready_reason() -> str:
        if supervisor.problem is not None:
            return f"Kafka: {supervisor.problem} (reconnecting)"
        return (current[-1].waiting_reason() or "ledger ready") if current else "connecting to Kafka"

    async with contextlib.AsyncExitStack() as stack:
        bootstrap = await stack.enter_async_context(kafka_bootstrap(settings, create_topics=False))
        api = await kube.api_client(settings)
        stack.push_async_callback(api.close)
        core = client.CoreV1Api(api)

        # Ready once the ledger has caught up: only then are placements taken.
        health = HealthServer(
            settings.health_port, ready=lambda: bool(current) and current[-1].caught_up.is_set(),
            reason=not_ready_reason,
        )  # fmt: skip
        port = await health.start()
        stack.push_async_callback(health.stop)
        log.info("binder.started", extra={"fields": {"health_port": port, "bootstrap": bootstrap}})
        await supervisor.run(
            "streams",
            lambda: _run_streams(settings, bootstrap, core, policy=policy, stop=stop,
                                 supervisor=supervisor, current=current),  # fmt: skip
        )
    provider.force_flush()


async def _run_streams(
    settings: Settings,
    bootstrap: str,
    core: client.CoreV1Api,
    *,
    policy: BackoffPolicy,
    stop: asyncio.Event,
    supervisor: Supervisor,
    current: list[TopicFollower],
) -> None:
    """One run of the binder's streams, from a fresh connection and an empty ledger."""
    current.clear()
    # A broker that came back empty gets its topics again.
    await ensure_topics(bootstrap, security=settings.kafka_security)
    async with EventProducer(
        bootstrap, service=SERVICE, idempotence=settings.kafka_idempotence, security=settings.kafka_security
    ) as producer:
        ledger = DeviceLedger()
        follower = TopicFollower(
            bootstrap, LEDGER_TOPICS, service=SERVICE, producer=producer, security=settings.kafka_security
        )
        consumer = EventConsumer(
            bootstrap,
            [topics.PLACEMENTS],
            group_id=settings.group_id(SERVICE),
            service=SERVICE,
            producer=producer,
            concurrency=CONCURRENCY,
            security=settings.kafka_security,
        )
        events = EventRecorder(core, component=settings.scheduler_name)
        handler = PlacementHandler(
            ledger=ledger,
            binder=PodBinder(core, policy=policy),
            events=events,
            producer=producer,
            tracer=telemetry.get_tracer("topoplace.binder", service=SERVICE),
        )
        current.append(follower)
        ledger_task = asyncio.create_task(follower.run(ledger_feed(ledger)), name="binder-ledger")
        consumer_task: asyncio.Task[None] | None = None
        stopped = asyncio.create_task(stop.wait())
        caught_up = asyncio.create_task(follower.caught_up.wait())
        try:
            await asyncio.wait({stopped, caught_up, ledger_task}, return_when=asyncio.FIRST_COMPLETED)
            if caught_up.done() and not stop.is_set() and not ledger_task.done():
                supervisor.running()
                log.info("binder.ledger_ready", extra={"fields": {"pods": ledger.pod_count()}})
                consumer_task = asyncio.create_task(consumer.run(handler), name="binder-placements")
                await asyncio.wait({stopped, ledger_task, consumer_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            caught_up.cancel()
            await consumer.stop()
            await follower.stop()
            await events.close()  # Events still retrying are given up with the run
            await _reap(ledger_task, consumer_task)


async def _reap(*tasks: asyncio.Task[None] | None) -> None:
    """Wait for the loops to end; a loop that died of an error makes the service fail with it."""
    running = [t for t in tasks if t is not None]
    for task in running:
        if not task.done():
            task.cancel()
    results = await asyncio.gather(*running, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            raise result
