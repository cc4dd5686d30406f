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
from topoplace.broker import kafka_bootstrap
from topoplace.config import Settings
from topoplace.health import HealthServer
from topoplace.kafka_io import EventConsumer, EventProducer, Received, TopicFollower
from topoplace.logs import configure_logging

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
    """Bind placements until `stop` is set (or a component fails, which is raised)."""
    configure_logging(SERVICE, settings.log_level)
    provider = telemetry.setup_tracing(SERVICE, settings)
    stop = stop or asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        bootstrap = await stack.enter_async_context(kafka_bootstrap(settings))
        producer = EventProducer(bootstrap, service=SERVICE, idempotence=settings.kafka_idempotence)
        await producer.start()
        stack.push_async_callback(producer.stop)

        api = await kube.api_client(settings)
        stack.push_async_callback(api.close)
        core = client.CoreV1Api(api)

        ledger = DeviceLedger()
        follower = TopicFollower(bootstrap, LEDGER_TOPICS, service=SERVICE, producer=producer)
        consumer = EventConsumer(
            bootstrap,
            [topics.PLACEMENTS],
            group_id=settings.group_id(SERVICE),
            service=SERVICE,
            producer=producer,
            concurrency=CONCURRENCY,
        )
        handler = PlacementHandler(
            ledger=ledger,
            binder=PodBinder(core, policy=policy),
            events=EventRecorder(core, component=settings.scheduler_name),
            producer=producer,
            tracer=telemetry.get_tracer("topoplace.binder", service=SERVICE),
        )

        # Ready once the ledger has caught up: only then are placements taken.
        health = HealthServer(settings.health_port, ready=follower.caught_up.is_set)
        port = await health.start()
        stack.push_async_callback(health.stop)
        log.info("binder.started", extra={"fields": {"health_port": port, "bootstrap": bootstrap}})

        ledger_task = asyncio.create_task(follower.run(ledger_feed(ledger)), name="binder-ledger")
        consumer_task: asyncio.Task[None] | None = None
        stopped = asyncio.create_task(stop.wait())
        caught_up = asyncio.create_task(follower.caught_up.wait())
        try:
            await asyncio.wait({stopped, caught_up, ledger_task}, return_when=asyncio.FIRST_COMPLETED)
            if caught_up.done() and not stop.is_set() and not ledger_task.done():
                log.info("binder.ledger_ready", extra={"fields": {"pods": ledger.pod_count()}})
                consumer_task = asyncio.create_task(consumer.run(handler), name="binder-placements")
                await asyncio.wait({stopped, ledger_task, consumer_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            caught_up.cancel()
            await consumer.stop()
            await follower.stop()
            await _reap(ledger_task, consumer_task)
    provider.force_flush()


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
