"""The cluster watcher as a service: declared to topoplace.service_runtime.run_service.

Each run of its body is a new ClusterWatcher: it seeds from the compacted topics what was
published before (so the first list can report what vanished meanwhile), reads
pods.lifecycle back as the topic holds it, lists and watches the cluster, and starts over
when the broker may have lost its data.
"""

from __future__ import annotations

import asyncio
import logging
import os

from aiokafka.errors import KafkaError

from schemas import topics
from schemas.events import Event
from schemas.seal import DecisionKey
from services.collector.cluster.kinds import SEEDED_TOPICS
from services.collector.cluster.watcher import PUBLISHED_TOPICS, SERVICE, ClusterWatcher
from topoplace.config import Settings
from topoplace.informer import api_server_unavailable
from topoplace.kafka.bootstrap import check_kafka_setting
from topoplace.kafka.data_loss import watch_for_data_loss
from topoplace.kafka.follower import TopicFollower, latest_by_key, read_compacted
from topoplace.kafka.records import Received
from topoplace.kafka.security import KafkaSecurity
from topoplace.kube import api_client
from topoplace.service_runtime import Gate, Loop, RunContext, ServiceRun, ServiceSpec, Stage, run_service
from topoplace.supervise import raise_when_recovered

log = logging.getLogger(__name__)


async def run_cluster_watcher(
    settings: Settings,
    *,
    resync_seconds: float = 300.0,
    hypernodes_file: str | None = None,
    stop: asyncio.Event | None = None,
    broker_check_seconds: float = 10.0,
) -> None:
    """Run until `stop` is set; a broker outage restarts the watcher, any other failure raises.

    Every `broker_check_seconds` the end offsets of its topics are compared with the highest
    seen: a broker that came back without its data gets the whole cluster relisted.
    """
    if resync_seconds <= 0:
        raise ValueError(f"resync_seconds: must be positive, got {resync_seconds}")
    if hypernodes_file is not None and not os.path.exists(hypernodes_file):
        raise FileNotFoundError(f"hypernodes_file: {hypernodes_file} does not exist")
    check_kafka_setting(settings)  # before "started" is logged
    decision_key = DecisionKey(settings.require_decision_key())  # a ConfigError before anything starts
    api = await api_client(settings)

    async def build(run: RunContext) -> ServiceRun:
        # Every run is a new watcher: it seeds from the topics and lists everything again,
        # so a broker that came back empty gets the whole cluster republished.
        watcher = ClusterWatcher(
            api,
            run.producer,
            scheduler_name=settings.scheduler_name,
            resync_seconds=resync_seconds,
            hypernodes_file=hypernodes_file,
            decision_key=decision_key,
        )
        security = settings.kafka_security
        loops = (
            # A broker back from an outage may be empty: a new watcher relists everything.
            Loop("recovery", lambda: raise_when_recovered(run.producer.recovered)),
            Loop("data-loss", lambda: _watch_for_data_loss(run, broker_check_seconds)),
            Loop("lifecycle", lambda: _read_back_lifecycle(watcher, run.bootstrap, security)),
            Loop("topologies", lambda: _read_back_topologies(watcher, run.bootstrap, security)),
            Loop("watch", lambda: _seeded_run(watcher, run.bootstrap, security)),
        )
        listed = tuple(
            Gate(name=name, passed=event, waiting=lambda: "listing the cluster")
            for name, event in watcher.readiness().items()
        )
        informers = [informer for versions in watcher.watches.values() for informer in versions]
        # a watcher that cannot list the cluster publishes nothing new: not ready, and the API server named
        return ServiceRun(stages=(Stage(loops=loops, gates=listed),), unavailable=api_server_unavailable(informers))

    try:
        spec = ServiceSpec(
            name=SERVICE,
            log_name="collector.cluster_watcher",
            settings=settings,
            build=build,
            stop=stop,
            started_fields={"scheduler": settings.scheduler_name},
        )
        await run_service(spec)
    finally:
        await api.close()


async def _watch_for_data_loss(run: RunContext, interval: float) -> None:
    await watch_for_data_loss(
        run.bootstrap,
        PUBLISHED_TOPICS,
        producer=run.producer,
        service=SERVICE,
        interval=interval,
        security=run.settings.kafka_security,
    )


async def _seeded_run(watcher: ClusterWatcher, bootstrap: str, security: KafkaSecurity) -> None:
    await _seed_from_topics(watcher, bootstrap, security)
    await watcher.run()


async def _read_back_lifecycle(watcher: ClusterWatcher, bootstrap: str, security: KafkaSecurity) -> None:
    """pods.lifecycle as the topic holds it, forged records too, so a relist can tombstone what it did not list."""
    follower = TopicFollower(bootstrap, [topics.PODS_LIFECYCLE], service=SERVICE, security=security)

    async def seen(message: Received) -> None:
        if message.key is not None:
            watcher.trackers.pods.on_topic(message.key, message.event)

    try:
        await follower.run(seen)
    finally:
        await follower.stop()


async def _read_back_topologies(watcher: ClusterWatcher, bootstrap: str, security: KafkaSecurity) -> None:
    """topology.nodes as the topic holds it: whose record each node's is (an agent's wins over the Node's)."""
    follower = TopicFollower(bootstrap, [topics.TOPOLOGY_NODES], service=SERVICE, security=security)

    async def seen(message: Received) -> None:
        if message.key is not None:
            await watcher.topology_read_back(message.key, message.event)

    async def caught_up() -> None:
        await follower.caught_up.wait()
        await watcher.topologies_read_back()

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(follower.run(seen))
            group.create_task(caught_up())
    finally:
        await follower.stop()


async def _seed_from_topics(watcher: ClusterWatcher, bootstrap: str, security: KafkaSecurity) -> None:
    records: dict[str, list[Event]] = {}
    for topic in SEEDED_TOPICS:
        try:
            latest = latest_by_key(await read_compacted(bootstrap, topic, service=SERVICE, security=security))
        except (LookupError, TimeoutError, OSError, KafkaError) as exc:
            log.warning("collector.seed_failed", extra={"fields": {"topic": topic.name, "error": str(exc)}})
            latest = {}
        records[topic.name] = [m.event for m in latest.values() if m.event is not None]
    watcher.seed(records)
