"""The topic list: name, event type, key and retention of every topic."""

from __future__ import annotations

import msgspec

from schemas import events


class Topic(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    event: type[events.Event]
    key: str  # what the message key is
    compacted: bool  # the last value per key is the state
    partitions: int = 6
    description: str = ""

    @property
    def dlq(self) -> str:
        return f"{self.name}.dlq"


TOPOLOGY_NODES = Topic(
    name="topology.nodes",
    event=events.NodeTopologyEvent,
    key="node name",
    compacted=True,
    description="Devices of a node and the links between them (node agent).",
)
USAGE_DEVICES = Topic(
    name="usage.devices",
    event=events.DeviceUsageEvent,
    key="node name",
    compacted=True,
    description="Measured memory, utilization and health of a node's devices (node agent).",
)
NODES_STATUS = Topic(
    name="nodes.status",
    event=events.NodeStatusEvent,
    key="node name",
    compacted=True,
    description="Labels, allocatable, readiness and cordon of a node (cluster watcher).",
)
TOPOLOGY_NETWORK = Topic(
    name="topology.network",
    event=events.HyperNodeEvent,
    key="hypernode name",
    compacted=True,
    description="The network tree: one HyperNode per message (cluster watcher).",
)
TOPOLOGY_LEVELS = Topic(
    name="topology.levels",
    event=events.TopologyLevelsEvent,
    key="Topology name",
    compacted=True,
    description="Kueue / KAI Topology objects: node-label levels of the network tree (cluster watcher).",
)
RESOURCE_SLICES = Topic(
    name="resources.slices",
    event=events.ResourceSliceEvent,
    key="ResourceSlice name",
    compacted=True,
    description="Node-local DRA ResourceSlices: each driver's devices and attributes (cluster watcher).",
)
RESOURCE_CLAIMS = Topic(
    name="resources.claims",
    event=events.AllocatedClaimEvent,
    key="ResourceClaim uid",
    compacted=True,
    description="Every allocated DRA ResourceClaim, of any scheduler: the devices it holds (cluster watcher).",
)
PODS_PENDING = Topic(
    name="pods.pending",
    event=events.PendingPodEvent,
    key="pod uid (or gang name)",
    compacted=False,
    description="Pods naming our scheduler that have no node (cluster watcher).",
)
GANGS_PENDING = Topic(
    name="gangs.pending",
    event=events.PendingGangEvent,
    key="gang name (<namespace>/<group>)",
    compacted=False,
    description="Gangs whose members are known, decided as one unit (cluster watcher).",
)
PODS_LIFECYCLE = Topic(
    name="pods.lifecycle",
    event=events.PodLifecycleEvent,
    key="pod uid",
    compacted=True,
    description="Every pod on a node, of any scheduler (its requests and devices), or deleted (cluster watcher).",
)
PLACEMENTS = Topic(
    name="placements",
    event=events.PlacementEvent,
    key="node name (pod uid when unschedulable)",
    compacted=False,
    description="One decision per pending pod (placer).",
)
GANG_PLACEMENTS = Topic(
    name="gangs.placements",
    event=events.GangPlacementEvent,
    key="gang name (<namespace>/<group>)",
    compacted=False,
    description="One decision per gang: every member placed, or none (placer).",
)
BINDINGS = Topic(
    name="bindings",
    event=events.BindingEvent,
    key="pod uid",
    compacted=False,
    description="The outcome of applying each decision (binder).",
)

ALL: tuple[Topic, ...] = (
    TOPOLOGY_NODES,
    USAGE_DEVICES,
    NODES_STATUS,
    TOPOLOGY_NETWORK,
    TOPOLOGY_LEVELS,
    RESOURCE_SLICES,
    RESOURCE_CLAIMS,
    PODS_PENDING,
    GANGS_PENDING,
    PODS_LIFECYCLE,
    PLACEMENTS,
    GANG_PLACEMENTS,
    BINDINGS,
)
BY_NAME: dict[str, Topic] = {t.name: t for t in ALL}


def all_topic_names(with_dlq: bool = True) -> list[str]:
    names = [t.name for t in ALL]
    if with_dlq:
        names += [t.dlq for t in ALL]
    return names
