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
import logging
import time
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
from services.binder.neuron_cores import NeuronCoreBook
from services.binder.pod_reader import PodReader
from services.binder.preemption import PreemptionExecutor
from services.binder.reporting import PodReporter
from services.binder.reservations import HeldRoom, Reservations
from services.binder.retry import DEFAULT_POLICY, BackoffPolicy
from services.binder.volume_binding import VolumeBinder
from services.binder.volume_watch import StorageWatch, watch_storage
from topoplace import kube, telemetry
from topoplace.config import Settings
from topoplace.informer import Informer, api_server_unavailable
from topoplace.kafka.bootstrap import check_kafka_setting
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received
from topoplace.service_runtime import (
    Fence,
    Follow,
    Gate,
    Loop,
    RunContext,
    ServiceRun,
    ServiceSpec,
    Stage,
    Work,
    run_service,
)

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
    check_kafka_setting(settings)
    api = await kube.api_client(settings)
    try:
        skip_proxy_lookups(api)
        core = client.CoreV1Api(api)

        async def build(run: RunContext) -> ServiceRun:
            return _binder_run(settings, run.producer, core, decision_key, policy=policy)

        await run_service(ServiceSpec(name=SERVICE, log_name="binder", settings=settings, build=build, stop=stop))
    finally:
        await api.close()


def _binder_run(
    settings: Settings,
    producer: EventProducer,
    core: client.CoreV1Api,
    decision_key: DecisionKey,
    *,
    policy: BackoffPolicy,
) -> ServiceRun:
    """One run of the binder, from a fresh API watch and an empty ledger.

    The watches list first, then the ledger replays its topics; placements are taken once it has
    caught up. With leader election, placements are taken only while this binder holds the Lease
    (a standby keeps its watches and ledger warm, and is ready); a lost Lease cancels the binds in
    flight at once and ends the run, which starts over.
    """
    cluster = ClusterView(settings.scheduler_name, decision_key=decision_key)
    ledger = DeviceLedger(pod_gone=cluster.knows_gone, pod_bound_on=cluster.bound_on)
    events = EventRecorder(core, component=settings.scheduler_name)
    reporter = PodReporter(events, ConditionWriter(core, sleep=asyncio.sleep), watch=cluster)
    allocated = AllocatedDevices()  # every ResourceClaim's devices: no device is allocated twice
    dra = client.ResourceV1Api(core.api_client)  # type: ignore[attr-defined]  # the stubs omit it
    claims = ClaimWriter(dra, request_timeout=policy.request_timeout_seconds, allocated=allocated)
    storage = StorageWatch()  # every PersistentVolumeClaim, PersistentVolume and StorageClass
    binder = PodBinder(
        core,
        policy=policy,
        device_memory=ledger.device_memory,
        device_uuid=ledger.device_uuid,
        neuron_cores=NeuronCoreBook(ledger),
        claims=claims,
        decision_key=decision_key,
        volumes=volume_binder(cluster, core, storage, settings.volume_bind_timeout_seconds),
    )
    reservations = Reservations(hold_seconds=settings.nomination_seconds, pod_gone=cluster.knows_gone)
    preemption = PreemptionExecutor(core, cluster, reservations, component=settings.scheduler_name, policy=policy)
    steps = BindingSteps(
        ledger=ledger,
        binder=binder,
        reporter=reporter,
        cluster=cluster,
        reader=PodReader(core, policy=policy),
        preemption=preemption,
        held=HeldRoom(reservations, cluster, time.time),
    )
    tracer = telemetry.get_tracer("topoplace.binder", service=SERVICE)
    placements = PlacementHandler(steps=steps, producer=producer, tracer=tracer)
    gangs = GangHandler(steps=steps, producer=producer, tracer=tracer)

    async def decide(message: Received) -> None:
        await (gangs if message.topic == topics.GANG_PLACEMENTS.name else placements)(message)

    async def closing() -> None:
        await reporter.drain()  # Events and conditions in flight still go out
        await events.close()  # Events still retrying are given up with the run

    watches: list[Informer[Any]] = [
        *watch_cluster(core, cluster, ledger),
        watch_claims(dra, allocated),
        *watch_storage(core, storage),
    ]
    watching = Stage(
        loops=tuple(Loop(f"watch-{w.resource}", w.run) for w in watches),
        gates=tuple(Gate(name=f"the first list of {w.resource}", passed=w.listed) for w in watches),
    )
    stages = [watching, Stage(follow=Follow(topics=LEDGER_TOPICS, handler=ledger_feed(ledger)))]
    fence: Fence | None = None
    leadership = _leadership(settings, core)
    if leadership is not None:
        stages.insert(0, Stage(loops=(Loop("leadership", leadership.run),)))  # first in, last out
        stages.append(Stage(gates=(Gate(name="the Lease", passed=leadership.leading, ready=False),)))
        fence = _lease_fence(leadership, settings.lease_timings.stop_grace_seconds)
    return ServiceRun(
        stages=tuple(stages),
        work=Work(
            topics=DECISION_TOPICS, handler=decide, concurrency=CONCURRENCY, ready_when_joined=False, fence=fence
        ),
        working=lambda: log.info("binder.ledger_ready", extra={"fields": {"pods": ledger.pod_count()}}),
        closing=closing,
        unavailable=api_server_unavailable(watches),  # a binder that cannot reach it cannot bind
    )


def volume_binder(
    cluster: ClusterView, core: client.CoreV1Api, storage: StorageWatch, timeout_seconds: float
) -> VolumeBinder:
    """VolumeBinding's PreBind, reading the pod's claims and the node's labels from the binder's own watch."""

    def pod_claims(uid: str) -> tuple[str, ...] | None:
        rules = cluster.placement_rules(uid)
        return rules.volume_claims if rules is not None else None

    def node_labels(node: str) -> dict[str, str] | None:
        rules = cluster.node_rules(node)
        return rules.labels if rules is not None else None

    return VolumeBinder(
        core, storage, pod_claims=pod_claims, node_labels=node_labels, bind_timeout_seconds=timeout_seconds
    )


def _lease_fence(leadership: Leadership, grace: float) -> Fence:
    """A lost Lease cancels the binds in flight at once (cancel_binds_on_loss)."""

    async def guard(binds: asyncio.Task[None]) -> None:
        await cancel_binds_on_loss(leadership.lost, binds, grace=grace)

    return Fence(lost=leadership.lost, guard=guard)


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
