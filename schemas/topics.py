"""The topic list: name, event type, key, and the settings (partitions, cleanup, retention) of every topic.

`Topic.settings()` and `Topic.dlq_settings()` are the one table of what each topic
must be on the broker: the admin code creates and checks the topics by it, and a
test holds docs/topics.md to it. Durability (replication factor, min.insync.replicas)
depends on the cluster, not the topic: topoplace/kafka/admin.py adds it.
"""

from __future__ import annotations

import msgspec

from schemas import events

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
# A by-time topic keeps a message one day: pending events are published again on every re-list,
# and the placer replays placements and bindings from offset 0 at start, so longer costs start-up
# time; one day is also how long a compacted topic keeps a tombstone (delete.retention.ms), so a
# decision is never kept longer than the record of its pod's deletion.
EVENT_RETENTION_MS = DAY_MS
DLQ_RETENTION_MS = 7 * DAY_MS  # dead letters are read by people: a week to notice them
DLQ_PARTITIONS = 1  # dead letters are read by people and tools, in arrival order


class TopicSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What one topic must be on the broker, durability aside."""

    name: str
    partitions: int  # at least: partitions can grow, never shrink
    cleanup_policy: str  # "compact" (the last value per key is the state) or "delete" (by time)
    retention_ms: int | None  # "delete" topics: how long a message is kept; None for compacted ones

    def configs(self) -> dict[str, str]:
        """The topic-level Kafka configs these settings mean."""
        configs = {"cleanup.policy": self.cleanup_policy}
        if self.retention_ms is not None:
            configs["retention.ms"] = str(self.retention_ms)
        else:  # a tombstone stays this long, so that a reader that was away sees the deletion
            configs["delete.retention.ms"] = str(DAY_MS)
        return configs


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

    def settings(self) -> TopicSettings:
        if self.compacted:
            return TopicSettings(
                name=self.name, partitions=self.partitions, cleanup_policy="compact", retention_ms=None
            )
        return TopicSettings(
            name=self.name, partitions=self.partitions, cleanup_policy="delete", retention_ms=EVENT_RETENTION_MS
        )

    def dlq_settings(self) -> TopicSettings:
        return TopicSettings(
            name=self.dlq, partitions=DLQ_PARTITIONS, cleanup_policy="delete", retention_ms=DLQ_RETENTION_MS
        )


TOPOLOGY_NODES = Topic(
    name="topology.nodes",
    event=events.NodeTopologyEvent,
    key="node name",
    compacted=True,
    description="Devices of a node and the links between them (node agent; cluster watcher from a Node object).",
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
    description="DRA ResourceSlices, whole: each driver's devices, attributes, taints and counters (cluster watcher).",
)
RESOURCE_CLAIMS = Topic(
    name="resources.claims",
    event=events.AllocatedClaimEvent,
    key="ResourceClaim uid",
    compacted=True,
    description="Every allocated DRA ResourceClaim, of any scheduler: the devices it holds (cluster watcher).",
)
NAMESPACES = Topic(
    name="namespaces",
    event=events.NamespaceEvent,
    key="namespace name",
    compacted=True,
    description="Namespaces and their labels, for pod affinity's namespaceSelector (cluster watcher).",
)
RESOURCE_CLASSES = Topic(
    name="resources.classes",
    event=events.DeviceClassEvent,
    key="DeviceClass name",
    compacted=True,
    description="DRA DeviceClasses: the selectors and config of each class (cluster watcher).",
)
RESOURCE_TAINT_RULES = Topic(
    name="resources.taintrules",
    event=events.DeviceTaintRuleEvent,
    key="DeviceTaintRule name",
    compacted=True,
    description="DRA DeviceTaintRules: taints on the devices each selects (cluster watcher).",
)
STORAGE_CLAIMS = Topic(
    name="storage.claims",
    event=events.VolumeClaimEvent,
    key="<namespace>/<name> of the PersistentVolumeClaim",
    compacted=True,
    description="Every PersistentVolumeClaim: class, request, bound volume, selected node (cluster watcher).",
)
STORAGE_VOLUMES = Topic(
    name="storage.volumes",
    event=events.PersistentVolumeEvent,
    key="PersistentVolume name",
    compacted=True,
    description="Every PersistentVolume: class, capacity, node affinity, zone labels, claim (cluster watcher).",
)
STORAGE_CLASSES = Topic(
    name="storage.classes",
    event=events.StorageClassEvent,
    key="StorageClass name",
    compacted=True,
    description="Every StorageClass: provisioner, binding mode, allowed topologies, default (cluster watcher).",
)
STORAGE_CSINODES = Topic(
    name="storage.csinodes",
    event=events.CsiNodeEvent,
    key="CSINode name (its node's)",
    compacted=True,
    description="Every CSINode: the volumes each CSI driver may attach to its node (cluster watcher).",
)
DISRUPTION_BUDGETS = Topic(
    name="disruption.budgets",
    event=events.DisruptionBudgetEvent,
    key="<namespace>/<name>",
    compacted=True,
    partitions=1,
    description="PodDisruptionBudgets: the disruptions each still allows, which preemption respects (cluster watcher).",
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
    NAMESPACES,
    RESOURCE_CLASSES,
    RESOURCE_TAINT_RULES,
    STORAGE_CLAIMS,
    STORAGE_VOLUMES,
    STORAGE_CLASSES,
    STORAGE_CSINODES,
    DISRUPTION_BUDGETS,
    PODS_PENDING,
    GANGS_PENDING,
    PODS_LIFECYCLE,
    PLACEMENTS,
    GANG_PLACEMENTS,
    BINDINGS,
)
BY_NAME: dict[str, Topic] = {t.name: t for t in ALL}


def settings_table(topics: tuple[Topic, ...] = ALL, with_dlq: bool = True) -> list[TopicSettings]:
    """Every topic's settings, each followed by its DLQ's."""
    table: list[TopicSettings] = []
    for topic in topics:
        table.append(topic.settings())
        if with_dlq:
            table.append(topic.dlq_settings())
    return table


def all_topic_names(with_dlq: bool = True) -> list[str]:
    names = [t.name for t in ALL]
    if with_dlq:
        names += [t.dlq for t in ALL]
    return names
