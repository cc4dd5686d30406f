"""The cluster watcher: pods, nodes, HyperNodes, PodGroups and Topologies from the API server, as events on Kafka.

- pods naming our scheduler without a node -> pods.pending (key pod uid), each
  published inside its own "pod.pending" span, so the placer continues that trace;
- pods of ours in a gang (Volcano PodGroup, Kueue pod group) -> gangs.pending
  (key gang name), the whole gang in one "gang.pending" span once it has its members;
- every pod on a node, of any scheduler, and its end -> pods.lifecycle (key pod
  uid), with its effective requests and the devices of `topoplace.io/devices`;
- nodes -> nodes.status (key node);
- Volcano HyperNodes (the CRD, or a file instead) -> topology.network (key
  hypernode; a deletion is a deleted event, then a tombstone);
- Kueue Topologies -> topology.levels (key Topology name; deleted the same way);
- node-local ResourceSlices -> resources.slices (key slice name), and every allocated
  ResourceClaim, of any scheduler -> resources.claims (key claim uid; deleted or
  deallocated: a deleted event, then a tombstone).

Wiring only: the translation and the memory of what was published live in
translate / gangs / trackers (pure), the list+watch loop in topoplace.informer;
the service around it (run_cluster_watcher) is service.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes_asyncio import client

from schemas import topics
from schemas.events import (
    AllocatedClaimEvent,
    HyperNodeEvent,
    LifecyclePhase,
    NodeStatusEvent,
    PodLifecycleEvent,
    ResourceSliceEvent,
    TopologyLevelsEvent,
)
from schemas.seal import DecisionKey
from services.collector.cluster import dra, trackers
from services.collector.cluster.hypernode_file import HyperNodeFileError, parse_hypernodes
from services.collector.cluster.metrics import INFORMER_METRICS
from services.collector.cluster.objects import HyperNode, Node, Pod, PodGroup, Topology
from services.collector.cluster.publish import BAD_FIELDS, EventPublishing, Publisher
from services.collector.cluster.trackers import Outcome, PodTracker
from topoplace import telemetry
from topoplace.informer import Informer, ResourceMissing

SERVICE = "topoplace-collector"
PUBLISHED_TOPICS = (
    topics.PODS_PENDING,
    topics.GANGS_PENDING,
    topics.PODS_LIFECYCLE,
    topics.NODES_STATUS,
    topics.TOPOLOGY_NETWORK,
    topics.TOPOLOGY_LEVELS,
    topics.RESOURCE_SLICES,
    topics.RESOURCE_CLAIMS,
)
DRA_GROUP = "resource.k8s.io"
VOLCANO_GROUP, VOLCANO_VERSION, HYPERNODES = "topology.volcano.sh", "v1alpha1", "hypernodes"
PODGROUP_GROUP, PODGROUP_VERSION, PODGROUPS = "scheduling.volcano.sh", "v1beta1", "podgroups"
KUEUE_GROUP, TOPOLOGIES = "kueue.x-k8s.io", "topologies"
KUEUE_TOPOLOGY_VERSIONS = ("v1beta2", "v1beta1")  # the first one served is watched

log = logging.getLogger(__name__)


class ClusterWatcher:
    """Lists and watches the cluster with `api` and publishes what changed through `publisher`."""

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
    ) -> None:
        """`decision_key`: the seal's key (schemas/seal.py); a pod's devices count only from a seal it verifies."""
        self.publisher = publisher
        self.scheduler_name = scheduler_name
        self.resync_seconds = resync_seconds
        self.hypernodes_file = hypernodes_file
        self.clock = clock
        self.file_poll_seconds = file_poll_seconds
        self.pods = PodTracker(scheduler_name, decision_key)
        self.nodes = trackers.node_tracker()
        self.hypernodes = trackers.hypernode_tracker()
        self.topologies = trackers.topology_tracker()
        self.slices = dra.slice_tracker()
        self.claims = dra.allocated_claim_tracker()
        core = client.CoreV1Api(api)
        self.pod_watch: Informer[Pod] = Informer(
            "pods",
            core.list_pod_for_all_namespaces,
            Pod,
            on_list=self._pods_listed,
            on_change=self._pod_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,  # every scheduler's pods: their requests fill the nodes
        )
        self.node_watch: Informer[Node] = Informer(
            "nodes",
            core.list_node,
            Node,
            on_list=self._nodes_listed,
            on_change=self._node_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,
        )
        self.dra = client.ResourceV1Api(api)
        self.publishing = EventPublishing(publisher, self.dra, telemetry.get_tracer(__name__, SERVICE))
        self.slice_watch: Informer[dra.ResourceSlice] = Informer(
            "resourceslices",
            self.dra.list_resource_slice,
            dra.ResourceSlice,
            on_list=self._slices_listed,
            on_change=self._slice_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,
        )
        self.claim_watch: Informer[dra.ResourceClaim] = Informer(
            "resourceclaims",
            self.dra.list_resource_claim_for_all_namespaces,
            dra.ResourceClaim,
            on_list=self._claims_listed,
            on_change=self._claim_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,  # every scheduler's claims: their devices are taken
        )
        custom = client.CustomObjectsApi(api)
        self.hypernode_watch: Informer[HyperNode] = Informer(
            "hypernodes",
            functools.partial(custom.list_cluster_custom_object, VOLCANO_GROUP, VOLCANO_VERSION, HYPERNODES),
            HyperNode,
            on_list=self._hypernodes_listed,
            on_change=self._hypernode_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,
        )
        self.podgroup_watch: Informer[PodGroup] = Informer(
            "podgroups",
            functools.partial(custom.list_cluster_custom_object, PODGROUP_GROUP, PODGROUP_VERSION, PODGROUPS),
            PodGroup,
            on_list=self._podgroups_listed,
            on_change=self._podgroup_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,
        )
        self.topology_watches: list[Informer[Topology]] = [
            Informer(
                f"topologies.{version}",
                functools.partial(custom.list_cluster_custom_object, KUEUE_GROUP, version, TOPOLOGIES),
                Topology,
                on_list=self._topologies_listed,
                on_change=self._topology_changed,
                metrics=INFORMER_METRICS,
                resync_seconds=resync_seconds,
                watch_timeout=watch_timeout,
            )
            for version in KUEUE_TOPOLOGY_VERSIONS
        ]
        # listed once, or known to be absent (a cluster without the CRD)
        self.hypernodes_settled = asyncio.Event()
        self.podgroups_settled = asyncio.Event()
        self.topologies_settled = asyncio.Event()
        self.slices_settled = asyncio.Event()
        self.claims_settled = asyncio.Event()

    # --- state from before a restart ------------------------------------------------------------

    def seed(
        self,
        lifecycle: Sequence[PodLifecycleEvent],
        node_status: Sequence[NodeStatusEvent],
        network: Sequence[HyperNodeEvent],
        levels: Sequence[TopologyLevelsEvent] = (),
        slices: Sequence[ResourceSliceEvent] = (),
        claims: Sequence[AllocatedClaimEvent] = (),
    ) -> None:
        """What the compacted topics say was published, so the first list can report what vanished."""
        self.pods.seed(e for e in lifecycle if e.phase is LifecyclePhase.BOUND)
        self.nodes.seed({e.node: e for e in node_status if not e.deleted})
        self.hypernodes.seed({e.name: e for e in network if not e.deleted})
        self.topologies.seed({e.name: e for e in levels if not e.deleted})
        self.slices.seed({e.name: e for e in slices if not e.deleted})
        self.claims.seed({e.uid: e for e in claims if not e.deleted})

    # --- running --------------------------------------------------------------------------------

    def readiness(self) -> dict[str, asyncio.Event]:
        """What must be listed (or known to be absent) before the watcher is ready."""
        return {
            "pods": self.pod_watch.listed,
            "nodes": self.node_watch.listed,
            "hypernodes": self.hypernodes_settled,
            "podgroups": self.podgroups_settled,
            "topologies": self.topologies_settled,
            "resourceslices": self.slices_settled,
            "resourceclaims": self.claims_settled,
        }

    def ready(self) -> bool:
        return all(event.is_set() for event in self.readiness().values())

    async def wait_ready(self) -> None:
        await asyncio.gather(*(event.wait() for event in self.readiness().values()))

    async def run(self) -> None:
        """Until cancelled; a failure of one resource's loop ends all of them."""
        if self.hypernodes_file:
            hypernodes = self._hypernodes_from_file()
        else:
            hypernodes = self._optional_resource([self.hypernode_watch], self.hypernodes_settled, VOLCANO_GROUP)
        async with asyncio.TaskGroup() as group:
            group.create_task(self.pod_watch.run())
            group.create_task(self.node_watch.run())
            group.create_task(hypernodes)
            group.create_task(self._optional_resource([self.podgroup_watch], self.podgroups_settled, PODGROUP_GROUP))
            group.create_task(self._optional_resource(self.topology_watches, self.topologies_settled, KUEUE_GROUP))
            group.create_task(self._optional_resource([self.slice_watch], self.slices_settled, DRA_GROUP))
            group.create_task(self._optional_resource([self.claim_watch], self.claims_settled, DRA_GROUP))

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

    async def _hypernodes_from_file(self) -> None:
        """Read the file at start, again whenever it changes, and at every resync."""
        assert self.hypernodes_file is not None
        path = self.hypernodes_file
        last_mtime: float | None = None
        next_resync = time.monotonic() + self.resync_seconds
        away = False
        while True:
            try:
                mtime: float | None = os.stat(path).st_mtime
                away = False
            except OSError as exc:
                mtime = last_mtime  # keep the last contents while the file is away
                if not away:
                    log.warning(
                        "collector.hypernodes_file_unreadable", extra={"fields": {"path": path, "error": str(exc)}}
                    )
                away = True
            resync = time.monotonic() >= next_resync
            if mtime != last_mtime or resync:
                hypernodes = self._read_hypernode_file(path)
                if hypernodes is not None:
                    await self.publish(self.hypernodes.relisted(hypernodes, self.clock(), force=resync))
                    self.hypernodes_settled.set()
                last_mtime = mtime
                if resync:
                    next_resync = time.monotonic() + self.resync_seconds
            await asyncio.sleep(min(self.resync_seconds, self.file_poll_seconds))  # a poll interval

    def _read_hypernode_file(self, path: str) -> list[HyperNode] | None:
        try:
            with open(path, encoding="utf-8") as f:
                return parse_hypernodes(f.read(), source=path)
        except (OSError, UnicodeDecodeError, HyperNodeFileError) as exc:
            # keep the last good contents: a half-written file must not delete the network tree
            BAD_FIELDS.labels(field="hypernodes_file").inc()
            log.warning("collector.hypernodes_file_unreadable", extra={"fields": {"path": path, "error": str(exc)}})
            return None

    # --- handlers -------------------------------------------------------------------------------

    async def _pods_listed(self, pods: list[Pod], resync: bool) -> None:
        await self.publish(self.pods.relisted(pods, self.clock(), force=resync))

    async def _pod_changed(self, kind: str, pod: Pod) -> None:
        if kind == "DELETED":
            await self.publish(self.pods.gone(pod.metadata.uid, self.clock()))
        else:
            await self.publish(self.pods.observe(pod, self.clock()))

    async def _nodes_listed(self, nodes: list[Node], resync: bool) -> None:
        await self.publish(self.nodes.relisted(nodes, self.clock(), force=resync))

    async def _node_changed(self, kind: str, node: Node) -> None:
        if kind == "DELETED":
            await self.publish(self.nodes.gone(node.metadata.name, self.clock()))
        else:
            await self.publish(self.nodes.observe(node, self.clock()))

    async def _hypernodes_listed(self, hypernodes: list[HyperNode], resync: bool) -> None:
        await self.publish(self.hypernodes.relisted(hypernodes, self.clock(), force=resync))
        self.hypernodes_settled.set()

    async def _hypernode_changed(self, kind: str, hypernode: HyperNode) -> None:
        if kind == "DELETED":
            await self.publish(self.hypernodes.gone(hypernode.metadata.name, self.clock()))
        else:
            await self.publish(self.hypernodes.observe(hypernode, self.clock()))

    async def _podgroups_listed(self, groups: list[PodGroup], resync: bool) -> None:
        # a resync of the pods re-publishes the gangs; the PodGroups only feed them
        await self.publish(self.pods.podgroups_relisted(groups, self.clock()))
        self.podgroups_settled.set()

    async def _podgroup_changed(self, kind: str, group: PodGroup) -> None:
        meta = group.metadata
        if kind == "DELETED":
            await self.publish(self.pods.podgroup_gone(f"{meta.namespace}/{meta.name}", self.clock()))
        else:
            await self.publish(self.pods.podgroup_observed(group, self.clock()))

    async def _topologies_listed(self, topologies: list[Topology], resync: bool) -> None:
        await self.publish(self.topologies.relisted(topologies, self.clock(), force=resync))
        self.topologies_settled.set()

    async def _topology_changed(self, kind: str, topology: Topology) -> None:
        if kind == "DELETED":
            await self.publish(self.topologies.gone(topology.metadata.name, self.clock()))
        else:
            await self.publish(self.topologies.observe(topology, self.clock()))

    async def _slices_listed(self, slices: list[dra.ResourceSlice], resync: bool) -> None:
        local = [s for s in slices if s.spec.node_name]
        await self.publish(self.slices.relisted(local, self.clock(), force=resync))
        self.slices_settled.set()

    async def _slice_changed(self, kind: str, resource_slice: dra.ResourceSlice) -> None:
        if kind == "DELETED" or not resource_slice.spec.node_name:
            await self.publish(self.slices.gone(resource_slice.metadata.name, self.clock()))
        else:
            await self.publish(self.slices.observe(resource_slice, self.clock()))

    async def _claims_listed(self, claims: list[dra.ResourceClaim], resync: bool) -> None:
        allocated = [c for c in claims if dra.is_allocated(c)]
        await self.publish(self.claims.relisted(allocated, self.clock(), force=resync))
        self.claims_settled.set()

    async def _claim_changed(self, kind: str, claim: dra.ResourceClaim) -> None:
        if kind == "DELETED" or not dra.is_allocated(claim):
            await self.publish(self.claims.gone(claim.metadata.uid, self.clock()))
        else:
            await self.publish(self.claims.observe(claim, self.clock()))

    # --- publishing -----------------------------------------------------------------------------

    async def publish(self, outcome: Outcome) -> None:
        await self.publishing.publish(outcome)
