"""The binder service: wiring only.

Start-up order matters: tracing before the Kubernetes client (the aiohttp
instrumentation only reaches sessions created after it); the API server's
pods and nodes listed before the ledger replays `pods.lifecycle` (a
"deleted" there frees devices only if the API server agrees, so it must know
the cluster first); the ledger caught up before the first placement is taken
(a half-built ledger would let a device go out twice); every ResourceClaim listed
before the first placement too (the DRA devices other claims hold are checked
against it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from schemas import topics
from schemas.seal import DecisionKey
from services.binder.apply import PodBinder
from services.binder.claim_watch import AllocatedDevices, watch_claims
from services.binder.claims import ClaimWriter
from services.binder.cluster_view import ClusterView, PodChange
from services.binder.conditions import ConditionWriter
from services.binder.gang import GangHandler
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.kube_events import EventRecorder
from services.binder.kube_objects import NodeObject, PodObject
from services.binder.leadership import Leadership, cancel_binds_on_loss, default_identity
from services.binder.ledger import DeviceLedger, LedgerNote
from services.binder.metrics import (
    INFORMER_METRICS,
    LEDGER_BOUND_UNCONFIRMED,
    LEDGER_DELETES_REFUSED,
    LEDGER_EDITS_IGNORED,
    LEDGER_PODS,
    UNSEALED_PODS,
)
from services.binder.pod_reader import PodReader
from services.binder.reporting import PodReporter
from services.binder.retry import DEFAULT_POLICY, BackoffPolicy
from topoplace import kube, telemetry
from topoplace.config import Settings
from topoplace.health import HealthServer
from topoplace.informer import Informer
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.bootstrap import kafka_bootstrap
from topoplace.kafka.consumer import EventConsumer
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received
from topoplace.logs import configure_logging
from topoplace.supervise import Supervisor

SERVICE = "topoplace-binder"
LEDGER_TOPICS = (topics.PODS_LIFECYCLE, topics.TOPOLOGY_NODES)
DECISION_TOPICS = (topics.PLACEMENTS, topics.GANG_PLACEMENTS)

log = logging.getLogger(__name__)

# Messages of one partition handled at once: the handler's synchronous part runs in order,
# its API calls and produces overlap.
CONCURRENCY = 16
# Pods, nodes and claims are listed again this often, whatever the watches said: a change a
# watch missed is not missed for good (the cluster watcher's informers do the same).
RESYNC_SECONDS = 300.0


def count_note(note: LedgerNote | None, uid: str, source: str) -> None:
    if note is LedgerNote.DELETE_REFUSED:
        LEDGER_DELETES_REFUSED.inc()
    elif note is LedgerNote.EDIT_IGNORED:
        LEDGER_EDITS_IGNORED.inc()
    elif note is LedgerNote.BOUND_UNCONFIRMED:
        LEDGER_BOUND_UNCONFIRMED.inc()
    if note is not None:
        log.warning("binder.ledger_report_ignored", extra={"fields": {"uid": uid, "source": source, "why": note.value}})


def report_unsealed(change: PodChange) -> None:
    """A bound pod whose device annotation has no valid seal: its devices do not count (schemas/seal.py)."""
    if change.now is not None and change.now.seal_problem:
        UNSEALED_PODS.inc()
        log.warning(
            "binder.pod_unsealed",
            extra={
                "fields": {
                    "pod": f"{change.namespace}/{change.name}",
                    "uid": change.uid,
                    "problem": change.now.seal_problem,
                    "counted": "by its resource requests only",
                }
            },
        )


def ledger_feed(ledger: DeviceLedger) -> Callable[[Received], Awaitable[None]]:
    """The follower's handler: every ledger topic message goes into the ledger."""

    async def feed(message: Received) -> None:
        note = ledger.apply_message(message.topic, message.key, message.event)
        count_note(note, message.key or "", message.topic)
        LEDGER_PODS.set(ledger.pod_count())

    return feed


def watch_cluster(
    core: client.CoreV1Api,
    cluster: ClusterView,
    ledger: DeviceLedger,
    *,
    applied: Callable[[], None] = lambda: None,
    resync_seconds: float = RESYNC_SECONDS,
) -> list[Informer[PodObject] | Informer[NodeObject]]:
    """The API server's pods (into the view and the ledger) and nodes (allocatable).

    `applied()` is called after each list or change is applied (tests wait on it)."""

    async def pods_listed(objects: list[PodObject], resync: bool) -> None:
        for change in cluster.replace_pods(objects):
            report_unsealed(change)
            count_note(ledger.apply_api_pod(change.uid, change.now), change.uid, "api")
        for uid in ledger.forget_unlisted(lambda uid: cluster.pod(uid) is not None):
            log.warning("binder.ledger_unlisted_released", extra={"fields": {"uid": uid}})
        LEDGER_PODS.set(ledger.pod_count())
        applied()

    async def pod_changed(event_type: str, obj: PodObject) -> None:
        change = cluster.apply_pod(event_type, obj)
        report_unsealed(change)
        count_note(ledger.apply_api_pod(change.uid, change.now), change.uid, "api")
        LEDGER_PODS.set(ledger.pod_count())
        applied()

    async def nodes_listed(objects: list[NodeObject], resync: bool) -> None:
        cluster.replace_nodes(objects)
        applied()

    async def node_changed(event_type: str, obj: NodeObject) -> None:
        cluster.apply_node(event_type, obj)
        applied()

    pods = Informer(
        "pods",
        core.list_pod_for_all_namespaces,
        PodObject,
        on_list=pods_listed,
        on_change=pod_changed,
        metrics=INFORMER_METRICS,
        resync_seconds=resync_seconds,
    )
    nodes = Informer(
        "nodes",
        core.list_node,
        NodeObject,
        on_list=nodes_listed,
        on_change=node_changed,
        metrics=INFORMER_METRICS,
        resync_seconds=resync_seconds,
    )
    return [pods, nodes]


def skip_proxy_lookups(api: client.ApiClient) -> None:
    """kubernetes-asyncio's session looks up proxy and netrc settings on every request
    (`trust_env`), in an executor thread. Looked up once here: with no proxy configured,
    that per-request lookup is turned off."""
    if urllib.request.getproxies():
        return
    session = api.rest_client.pool_manager
    if hasattr(session, "_trust_env"):
        session._trust_env = False


async def run_binder(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    policy: BackoffPolicy = DEFAULT_POLICY,
) -> None:
    """Bind placements until `stop` is set (or a component fails for a reason other than Kafka, which is raised)."""
    decision_key = DecisionKey(settings.require_decision_key())  # a ConfigError before anything starts
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
        skip_proxy_lookups(api)
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
            lambda: _run_streams(
                settings,
                bootstrap,
                core,
                decision_key,
                policy=policy,
                stop=stop,
                supervisor=supervisor,
                current=current,
            ),  # fmt: skip
        )
    provider.force_flush()


async def _run_streams(
    settings: Settings,
    bootstrap: str,
    core: client.CoreV1Api,
    decision_key: DecisionKey,
    *,
    policy: BackoffPolicy,
    stop: asyncio.Event,
    supervisor: Supervisor,
    current: list[TopicFollower],
) -> None:
    """One run of the binder's streams, from a fresh connection, a fresh API watch and an empty ledger.

    With leader election, placements are taken only while this binder holds the Lease; a standby
    keeps its watches and ledger warm. A lost Lease ends the run (LeadershipLost) and it starts over.
    """
    current.clear()
    # A broker that came back empty gets its topics again.
    await ensure_topics(bootstrap, security=settings.kafka_security, durability=settings.topic_durability)
    async with EventProducer(
        bootstrap, service=SERVICE, idempotence=settings.kafka_idempotence, security=settings.kafka_security
    ) as producer:
        cluster = ClusterView(settings.scheduler_name, decision_key=decision_key)
        ledger = DeviceLedger(pod_gone=cluster.knows_gone, pod_bound_on=cluster.bound_on)
        events = EventRecorder(core, component=settings.scheduler_name)
        reporter = PodReporter(events, ConditionWriter(core, sleep=asyncio.sleep), watch=cluster)
        allocated = AllocatedDevices()  # every ResourceClaim's devices: no device is allocated twice
        dra = client.ResourceV1Api(core.api_client)  # type: ignore[attr-defined]  # the stubs omit it
        claims = ClaimWriter(dra, request_timeout=policy.request_timeout_seconds, allocated=allocated)
        binder = PodBinder(
            core,
            policy=policy,
            device_memory=ledger.device_memory,
            device_uuid=ledger.device_uuid,
            claims=claims,
            decision_key=decision_key,
        )
        steps = BindingSteps(
            ledger=ledger, binder=binder, reporter=reporter, cluster=cluster, reader=PodReader(core, policy=policy)
        )
        tracer = telemetry.get_tracer("topoplace.binder", service=SERVICE)
        placements = PlacementHandler(steps=steps, producer=producer, tracer=tracer)
        gangs = GangHandler(steps=steps, producer=producer, tracer=tracer)

        async def decide(message: Received) -> None:
            if message.topic == topics.GANG_PLACEMENTS.name:
                await gangs(message)
            else:
                await placements(message)

        follower = TopicFollower(
            bootstrap, LEDGER_TOPICS, service=SERVICE, producer=producer, security=settings.kafka_security
        )
        consumer = EventConsumer(
            bootstrap,
            list(DECISION_TOPICS),
            group_id=settings.group_id(SERVICE),
            service=SERVICE,
            producer=producer,
            concurrency=CONCURRENCY,
            security=settings.kafka_security,
        )
        current.append(follower)
        watches: list[Informer[Any]] = [*watch_cluster(core, cluster, ledger), watch_claims(dra, allocated)]
        watch_tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(w.run(), name=f"binder-watch-{w.resource}") for w in watches
        ]
        leadership = _leadership(settings, core)
        elected: list[asyncio.Task[Any]] = (
            [asyncio.create_task(leadership.run(), name="binder-leadership")] if leadership is not None else []
        )
        ledger_task: asyncio.Task[None] | None = None
        consumer_task: asyncio.Task[None] | None = None
        guard: asyncio.Task[None] | None = None
        stopped = asyncio.create_task(stop.wait())
        try:
            if await _until(stopped, watch_tasks, *[asyncio.create_task(w.listed.wait()) for w in watches]):
                ledger_task = asyncio.create_task(follower.run(ledger_feed(ledger)), name="binder-ledger")
                loops = [*watch_tasks, ledger_task, *elected]
                if await _until(stopped, loops, asyncio.create_task(follower.caught_up.wait())) and (
                    leadership is None or await _until(stopped, loops, asyncio.create_task(leadership.leading.wait()))
                ):
                    supervisor.running()
                    log.info("binder.ledger_ready", extra={"fields": {"pods": ledger.pod_count()}})
                    consumer_task = asyncio.create_task(consumer.run(decide), name="binder-placements")
                    if leadership is not None:  # a lost Lease cancels the binds in flight at once
                        guard = asyncio.create_task(
                            cancel_binds_on_loss(
                                leadership.lost, consumer_task, grace=settings.lease_timings.stop_grace_seconds
                            ),
                            name="binder-lease-guard",
                        )
                    await asyncio.wait({stopped, *loops, consumer_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if guard is not None and leadership is not None and leadership.lost.is_set():
                await guard  # the binds are cancelled (or the process has ended) before anything else
            await consumer.stop()
            await follower.stop()
            await reporter.drain()  # Events and conditions in flight still go out
            await events.close()  # Events still retrying are given up with the run
            # The Lease goes last: no placement is taken once another binder may hold it.
            await _reap(ledger_task, consumer_task, *watch_tasks)
            await _reap(guard, *elected)


def _leadership(settings: Settings, core: client.CoreV1Api) -> Leadership | None:
    if not settings.leader_election:
        return None
    return Leadership(
        core.api_client,  # type: ignore[attr-defined]  # the stubs omit it
        name=f"{settings.scheduler_name}-binder",
        namespace=settings.leader_namespace,
        identity=settings.leader_identity or default_identity(),
        timings=settings.lease_timings,
    )


async def _until(stopped: asyncio.Task[bool], loops: list[asyncio.Task[Any]], *ready: asyncio.Task[bool]) -> bool:
    """Wait for every `ready` task; False when the binder stops or a loop ends first."""
    waiting: asyncio.Future[list[bool]] = asyncio.gather(*ready)
    try:
        watched: set[asyncio.Future[Any]] = {stopped, waiting, *loops}
        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        return waiting.done() and not stopped.done() and not any(t.done() for t in loops)
    finally:
        if not waiting.done():
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)


async def _reap(*tasks: asyncio.Task[Any] | None) -> None:
    """Wait for the loops to end; a loop that died of an error makes the service fail with it."""
    running = [t for t in tasks if t is not None]
    for task in running:
        if not task.done():
            task.cancel()
    results = await asyncio.gather(*running, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            raise result
