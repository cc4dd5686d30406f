"""The cluster watcher: pods, nodes, HyperNodes, PodGroups and Topologies from the API server, as events on Kafka.

- pods naming our scheduler without a node -> pods.pending (key pod uid), each
  published inside its own "pod.pending" span, so the placer continues that trace;
- pods of ours in a gang (Volcano PodGroup, Kueue pod group, Workload API PodGroup or
  Workload, KAI PodGroup) -> gangs.pending
  (key gang name), the whole gang in one "gang.pending" span once it has its members;
- every pod on a node, of any scheduler, and its end -> pods.lifecycle (key pod
  uid), with its effective requests and the devices of `topoplace.io/devices`;
- nodes -> nodes.status (key node); a Neuron or MetaX node's devices, read from its Node as its
  device plugin describes them -> topology.nodes (key node), unless a node agent publishes
  that node (node_devices.py);
- Volcano HyperNodes (the CRD, or a file instead) -> topology.network (key
  hypernode; a deletion is a deleted event, then a tombstone);
- Kueue Topologies -> topology.levels (key Topology name; deleted the same way), and KAI
  Topologies there too (key kai.scheduler/<name>: kai_topologies.py);
- ResourceSlices -> resources.slices (key slice name), DeviceClasses -> resources.classes
  (key class name), DeviceTaintRules -> resources.taintrules (key rule name), and every allocated
  ResourceClaim, of any scheduler -> resources.claims (key claim uid; deleted or
  deallocated: a deleted event, then a tombstone);
- namespaces -> namespaces (key name: their labels; deleted the same way); Services,
  ReplicationControllers, ReplicaSets and StatefulSets only feed the pending pods'
  DefaultSelector (workloads.py).
- PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes -> storage.claims (key
  <namespace>/<name>), storage.volumes, storage.classes, storage.csinodes (key name); deleted the
  same way.

Wiring only: what is watched is the table of kinds.py (one row per kind); the
translation and the memory of what was published live in translate / gangs /
trackers / dra (pure), the list+watch loop in topoplace.informer; the service
around it (run_cluster_watcher) is service.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes_asyncio import client

from schemas import topics
from schemas.events import Event
from schemas.seal import DecisionKey
from services.collector.cluster.hypernode_file import follow_hypernode_file
from services.collector.cluster.kinds import WATCHED_KINDS, Trackers
from services.collector.cluster.metrics import INFORMER_METRICS
from services.collector.cluster.publish import EventPublishing, Publisher
from services.collector.cluster.trackers import Outcome
from services.collector.cluster.watched_kind import WatchedKind
from topoplace import telemetry
from topoplace.informer import Informer, ResourceMissing

SERVICE = "topoplace-collector"
PUBLISHED_TOPICS = (
    topics.PODS_PENDING,
    topics.GANGS_PENDING,
    topics.PODS_LIFECYCLE,
    topics.NODES_STATUS,
    topics.TOPOLOGY_NODES,
    topics.TOPOLOGY_NETWORK,
    topics.TOPOLOGY_LEVELS,
    topics.RESOURCE_SLICES,
    topics.RESOURCE_CLAIMS,
    topics.NAMESPACES,
    topics.RESOURCE_CLASSES,
    topics.RESOURCE_TAINT_RULES,
    topics.STORAGE_CLAIMS,
    topics.STORAGE_VOLUMES,
    topics.STORAGE_CLASSES,
    topics.STORAGE_CSINODES,
    topics.DISRUPTION_BUDGETS,
)

log = logging.getLogger(__name__)


class ClusterWatcher:
    """Lists and watches every kind of WATCHED_KINDS with `api` and publishes what changed through `publisher`.

    Its `trackers` remember what was published, per topic.
    """

    def __init__(
        self,
        api: client.ApiClient,
        publisher: Publisher,
        *,
        scheduler_name: str,
        resync_seconds: float = 300.0,
        hypernodes_file: str | None = None,
        clock: Callable[[], float] = time.time,
        watch_timeout: float = 300.0,
        file_poll_seconds: float = 2.0,
        decision_key: DecisionKey | None = None,
        kinds: Sequence[WatchedKind[Any]] = WATCHED_KINDS,
    ) -> None:
        """`decision_key`: the seal's key (schemas/seal.py); a pod's devices count only from a seal it verifies."""
        self.trackers = Trackers(scheduler_name, decision_key)
        self.publisher = publisher
        self.scheduler_name = scheduler_name
        self.resync_seconds = resync_seconds
        self.hypernodes_file = hypernodes_file
        self.clock = clock
        self.file_poll_seconds = file_poll_seconds
        self.kinds = tuple(kinds)
        self.publishing = EventPublishing(publisher, client.ResourceV1Api(api), telemetry.get_tracer(__name__, SERVICE))
        # Per kind: its informers (one per version; the first served is watched), and an event set
        # once it was listed, or known to be absent (a cluster without the CRD).
        self.watches: dict[str, list[Informer[Any]]] = {
            kind.name: [self._informer(kind, name, call, watch_timeout) for name, call in kind.informers(api)]
            for kind in self.kinds
        }
        self.settled: dict[str, asyncio.Event] = {kind.name: asyncio.Event() for kind in self.kinds}

    def _informer(self, kind: WatchedKind[Any], name: str, call: Any, watch_timeout: float) -> Informer[Any]:
        return Informer(
            name,
            call,
            kind.object_type,
            on_list=functools.partial(self._listed, kind),
            on_change=functools.partial(self._changed, kind),
            metrics=INFORMER_METRICS,
            resync_seconds=self.resync_seconds,
            watch_timeout=watch_timeout,
        )

    # --- state from before a restart ------------------------------------------------------------

    def seed(self, records: Mapping[str, Sequence[Event]]) -> None:
        """What the compacted topics say was published (by topic name), so the first list can report what vanished."""
        for kind in self.kinds:
            if kind.seed is not None and kind.seeded_from is not None:
                kind.seed(self.trackers, records.get(kind.seeded_from.name, ()))

    # --- running --------------------------------------------------------------------------------

    def readiness(self) -> dict[str, asyncio.Event]:
        """What must be listed (or known to be absent) before the watcher is ready."""
        return dict(self.settled)

    def ready(self) -> bool:
        return all(event.is_set() for event in self.readiness().values())

    async def wait_ready(self) -> None:
        await asyncio.gather(*(event.wait() for event in self.readiness().values()))

    async def run(self) -> None:
        """Until cancelled; a failure of one kind's loop ends all of them."""
        async with asyncio.TaskGroup() as group:
            for kind in self.kinds:
                group.create_task(self._run_kind(kind), name=f"watch {kind.name}")

    async def _run_kind(self, kind: WatchedKind[Any]) -> None:
        settled = self.settled[kind.name]
        if kind.from_file and self.hypernodes_file:
            await follow_hypernode_file(
                self.hypernodes_file,
                self.trackers.hypernodes,
                self.publish,
                settled,
                resync_seconds=self.resync_seconds,
                poll_seconds=self.file_poll_seconds,
                clock=self.clock,
            )
        elif kind.api_group is None:
            for watch in self.watches[kind.name]:
                await watch.run()
        else:
            await self._optional_resource(self.watches[kind.name], settled, kind.api_group)

    async def _optional_resource(
        self, watches: Sequence[Informer[Any]], settled: asyncio.Event, api_group: str
    ) -> None:
        """A CRD the cluster may lack: the first version served is watched; none: ready, and asked again later."""
        announced = False
        while True:
            for watch in watches:
                try:
                    await watch.run()
                except ResourceMissing:
                    continue
            if not announced:
                resources = [w.resource for w in watches]
                log.info(
                    "collector.resource_not_served",
                    extra={"fields": {"group": api_group, "resources": resources, "retry_in": self.resync_seconds}},
                )
                announced = True
            settled.set()
            await asyncio.sleep(self.resync_seconds)  # look again later: the CRD may be installed meanwhile

    # --- handlers -------------------------------------------------------------------------------

    async def _listed(self, kind: WatchedKind[Any], objs: list[Any], resync: bool) -> None:
        counted = [o for o in objs if kind.counts(o)]
        await self.publish(kind.tracker(self.trackers).relisted(counted, self.clock(), force=resync))
        self.settled[kind.name].set()

    async def _changed(self, kind: WatchedKind[Any], change: str, obj: Any) -> None:
        tracker = kind.tracker(self.trackers)
        if change == "DELETED" or not kind.counts(obj):
            await self.publish(tracker.gone(kind.key(obj), self.clock()))
        else:
            await self.publish(tracker.observe(obj, self.clock()))

    # --- topology.nodes as the topic holds it (node_devices.py) --------------------------------

    async def topology_read_back(self, key: str, event: Event | None) -> None:
        """A topology.nodes record, anyone's: a node agent's makes the watcher leave that node to it."""
        await self.publish(self.trackers.node_devices.on_topic(key, event))

    async def topologies_read_back(self) -> None:
        """topology.nodes read to its end: the discovered nodes no agent publishes go out."""
        await self.publish(self.trackers.node_devices.caught_up(self.clock()))

    # --- publishing -----------------------------------------------------------------------------

    async def publish(self, outcome: Outcome) -> None:
        await self.publishing.publish(outcome)
