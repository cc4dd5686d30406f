"""Every event on every topic, as one msgspec Struct per topic.

JSON on the wire. Each event carries `schema_version`; a consumer rejects a
version it does not know into the topic's DLQ instead of guessing.
"""

from __future__ import annotations

import enum
from typing import ClassVar

import msgspec

from schemas.dra import AllocatedDevice, ClaimAllocation, DraDevice, PodClaim
from schemas.enforcement import Enforcement
from schemas.kube import Affinity, Taint, Toleration
from schemas.topology import Device, Link

SCHEMA_VERSION = 1

# The most bytes (as JSON) one event may take; producers refuse a bigger one (topoplace.kafka.wire).
# Kafka refuses a produce request over 1 MiB by default (the producer's max.request.size, the
# broker's message.max.bytes): an event near it fails the whole send, and a batch of several
# fails with it. A node's status, topology or ResourceSlice is a few KiB to a few tens of KiB.
MAX_EVENT_BYTES = 256 * 1024
# One pending pod: after the allow-list of labels and annotations (services/collector/
# watch_pending_fields.py) a real pod is one or two KiB; 64 KiB leaves room for long
# affinities and toleration lists, and no tenant can make one pod's event crowd the topic.
MAX_POD_EVENT_BYTES = 64 * 1024
# A gang carries every pending member (about 0.5-1 KiB each): room for about a thousand,
# still clear of the 1 MiB request limit.
MAX_GANG_EVENT_BYTES = 768 * 1024


class Event(msgspec.Struct, frozen=True, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    max_bytes: ClassVar[int] = MAX_EVENT_BYTES  # not on the wire: the bound of this kind of event


# --- topology.nodes (compacted, key = node) -------------------------------------------------


class NodeTopologyEvent(Event, frozen=True, kw_only=True):
    """The devices of one node and the links between them (from NVML or a fixture)."""

    node: str
    machine_type: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...] = ()
    source: str = ""
    observed_at: float = 0.0  # unix seconds


# --- usage.devices (key = node) -------------------------------------------------------------


class DeviceUsage(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    memory_used_mib: int = 0
    utilization_pct: int = 0
    healthy: bool = True


class DeviceUsageEvent(Event, frozen=True, kw_only=True):
    """Measured usage of a node's devices; health here overrides the topology's."""

    node: str
    devices: tuple[DeviceUsage, ...]
    observed_at: float = 0.0


# --- nodes.status (compacted, key = node) ---------------------------------------------------


class NodeStatusEvent(Event, frozen=True, kw_only=True):
    """What the API server says of a node: labels, capacity, readiness, cordon."""

    node: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    allocatable: dict[str, str] = {}  # resource name -> Kubernetes quantity
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False  # cordoned
    deleted: bool = False
    resource_version: str = ""
    observed_at: float = 0.0


# --- topology.network (compacted, key = hypernode) ------------------------------------------


class MemberKind(enum.StrEnum):
    NODE = "node"
    HYPERNODE = "hypernode"


class LabelSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()


class LabelSelector(msgspec.Struct, frozen=True, kw_only=True):
    """A Kubernetes label selector (metav1.LabelSelector): every label and every expression must match."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class HyperNodeMember(msgspec.Struct, frozen=True, kw_only=True):
    """One member selector of a HyperNode, as written: exactly one of `name`, `regex`, `labels` is set.

    `name` selects a node or a HyperNode by name (Volcano's exactMatch); `regex`
    (regexMatch, Go RE2 matched anywhere in the name) and `labels` (labelMatch)
    select nodes.
    """

    kind: MemberKind
    name: str = ""
    regex: str = ""
    labels: LabelSelector | None = None


class HyperNodeEvent(Event, frozen=True, kw_only=True):
    """One level of the network tree: tier 1 = closest (a ToR), higher tiers wrap lower ones."""

    name: str
    tier: int
    tier_name: str = ""  # Volcano's spec.tierName, which networkTopology.highestTierName refers to
    members: tuple[HyperNodeMember, ...]
    deleted: bool = False
    observed_at: float = 0.0


# --- topology.levels (compacted, key = Topology name) ---------------------------------------


class TopologyLevelsEvent(Event, frozen=True, kw_only=True):
    """A Kueue (or KAI) Topology: node-label keys, top level first, that build the network tree."""

    name: str
    levels: tuple[str, ...]
    deleted: bool = False
    observed_at: float = 0.0


# --- pods.pending (key = pod uid) -----------------------------------------------------------


class GangRef(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # "<namespace>/<group name>"
    min_member: int = 1


class PendingPodEvent(Event, frozen=True, kw_only=True):
    """A pod that names our scheduler and has no node yet.

    `unpublishable` is set when the collector could not publish the pod's event whole (over
    MAX_POD_EVENT_BYTES, or refused by the broker): the event then carries only who the pod
    is, and the placer reports the pod unschedulable with that reason.
    """

    max_bytes: ClassVar[int] = MAX_POD_EVENT_BYTES

    uid: str
    namespace: str
    name: str
    resource_version: str
    requests: dict[str, str] = {}  # resource name -> Kubernetes quantity, summed over containers
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    owner: str = ""  # "<kind>/<name>" of the controlling owner
    gang: GangRef | None = None
    priority: int = 0
    created_at: float = 0.0
    observed_at: float = 0.0
    # Node constraints, as the pod spec gives them (kube-scheduler's filters read them).
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    claims: tuple[PodClaim, ...] = ()  # DRA: the pod's ResourceClaims, with their requests
    unpublishable: str = ""  # why the pod could not be published whole (then nothing else is carried)


# --- resources.slices (compacted, key = ResourceSlice name) -------------------------------


class ResourceSliceEvent(Event, frozen=True, kw_only=True):
    """One node-local ResourceSlice (resource.k8s.io/v1): a driver's devices in one pool of one node."""

    name: str
    node: str
    driver: str
    pool: str
    devices: tuple[DraDevice, ...] = ()
    deleted: bool = False
    observed_at: float = 0.0


# --- resources.claims (compacted, key = ResourceClaim uid) --------------------------------


class AllocatedClaimEvent(Event, frozen=True, kw_only=True):
    """The devices one allocated ResourceClaim holds (resource.k8s.io/v1), whoever allocated it:
    ours and those kube-scheduler allocated for other pods. Deleted or deallocated: `deleted`."""

    uid: str
    namespace: str
    name: str
    node: str = ""  # the one node the allocation's nodeSelector names ("" when it names none)
    devices: tuple[AllocatedDevice, ...] = ()
    deleted: bool = False
    observed_at: float = 0.0


# --- gangs.pending (key = gang name) --------------------------------------------------------


class TopologyMode(enum.StrEnum):
    HARD = "hard"  # never above the allowed tier: unschedulable instead
    SOFT = "soft"  # prefer low tiers; never unschedulable for the network's sake


class NetworkConstraint(msgspec.Struct, frozen=True, kw_only=True):
    """How close a gang's (or subgroup's) pods must be: Volcano's networkTopology, Kueue's topology requests.

    The highest tier allowed is `highest_tier`, or the tier named `highest_tier_name` (a Volcano
    tierName, or for a tree of label levels the level's node-label key, as Kueue names levels).
    """

    mode: TopologyMode = TopologyMode.HARD
    highest_tier: int | None = None
    highest_tier_name: str = ""


class SubGroupPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Volcano's subGroupPolicy (or a Kueue slice): members grouped by label values, each group close."""

    name: str = ""
    sub_group_size: int = 0  # members per subgroup (0: as many as share the label values)
    min_sub_groups: int = 0
    match_label_keys: tuple[str, ...] = ()
    label_selector: LabelSelector | None = None  # the members it applies to (None: every member)
    network: NetworkConstraint | None = None


class RunningMember(msgspec.Struct, frozen=True, kw_only=True):
    """A gang member already bound: it is never placed again, and later members stay near it."""

    uid: str
    name: str
    node: str


class PendingGangEvent(Event, frozen=True, kw_only=True):
    """A gang whose members are known: decided as one unit, all or nothing.

    Published by the cluster watcher once at least `min_member` members exist
    (pending + running), from a Volcano PodGroup or Kueue's pod-group annotations.
    """

    max_bytes: ClassVar[int] = MAX_GANG_EVENT_BYTES

    name: str  # "<namespace>/<group name>"
    namespace: str
    min_member: int = 1
    network: NetworkConstraint | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    members: tuple[PendingPodEvent, ...]  # pending, by name
    running: tuple[RunningMember, ...] = ()
    source: str = ""  # "podgroup" (Volcano) or "kueue"
    observed_at: float = 0.0


# --- pods.lifecycle (key = pod uid) ---------------------------------------------------------


class LifecyclePhase(enum.StrEnum):
    BOUND = "bound"
    DELETED = "deleted"


class DeviceAssignment(msgspec.Struct, frozen=True, kw_only=True):
    """One device given to a pod, and the share of it (whole device = 100 cores, all memory)."""

    index: int
    uuid: str = ""
    memory_mib: int = 0  # 0 = the whole device's memory
    cores: int = 100


class PodLifecycleEvent(Event, frozen=True, kw_only=True):
    """A pod on a node (its devices and resources in use) or deleted (freed).

    Every scheduler's pods are reported, so a node's free cpu, memory and pods are known;
    `ours` tells the pods this scheduler placed."""

    uid: str
    namespace: str
    name: str
    phase: LifecyclePhase
    node: str = ""
    devices: tuple[DeviceAssignment, ...] = ()
    qos: str = ""
    app_class: str = ""
    requests: dict[str, str] = {}  # the pod's effective requests (Kubernetes quantities)
    ours: bool = True
    gang: str = ""  # "<namespace>/<group name>" when the pod belongs to a gang
    observed_at: float = 0.0


# --- placements (key = node) ----------------------------------------------------------------


class PlacementOutcome(enum.StrEnum):
    PLACED = "placed"
    UNSCHEDULABLE = "unschedulable"


class Alternative(msgspec.Struct, frozen=True, kw_only=True):
    """A node that could also take the pod, and why the chosen node beat it."""

    node: str
    score: float
    reason: str


MAX_ALTERNATIVES = 3  # runners-up a placement carries: enough to explain, small on the wire


class PlacementEvent(Event, frozen=True, kw_only=True):
    """The placer's decision for one pending pod."""

    decision_id: str
    uid: str
    namespace: str
    name: str
    pod_resource_version: str
    outcome: PlacementOutcome
    node: str = ""
    devices: tuple[DeviceAssignment, ...] = ()
    score: float = 0.0
    score_parts: dict[str, float] = {}
    reason: str = ""  # why it is unschedulable, in words a user understands
    candidates_considered: int = 0
    gang: GangRef | None = None
    qos: str = ""  # sharing class of the devices (MetaX sGPU QoS policy)
    app_class: str = ""  # MetaX online/offline class
    requests: dict[str, str] = {}  # the pod's effective requests, held on the node while assumed
    decided_at: float = 0.0
    claims: tuple[ClaimAllocation, ...] = ()  # DRA: the devices chosen for each of the pod's claims
    # How the node makes the device choice stick (schemas/enforcement.py): the binder writes
    # HAMi's annotations for `hami`; with a plain device plugin the devices are advice.
    enforcement: Enforcement = Enforcement.DEVICE_PLUGIN
    # The best few other nodes that fit, best first, and why they lost (at most MAX_ALTERNATIVES).
    alternatives: tuple[Alternative, ...] = ()


# --- gangs.placements (key = gang name) -----------------------------------------------------


class GangPlacementEvent(Event, frozen=True, kw_only=True):
    """The placer's one decision for a whole gang: every member placed, or none (UNSCHEDULABLE)."""

    max_bytes: ClassVar[int] = MAX_GANG_EVENT_BYTES

    decision_id: str
    name: str  # "<namespace>/<group name>"
    namespace: str
    outcome: PlacementOutcome
    members: tuple[PlacementEvent, ...]  # one per pending member (all PLACED, or all UNSCHEDULABLE)
    hypernode: str = ""  # the lowest hypernode holding every member (running ones included)
    tier: int | None = None  # its tier
    reason: str = ""
    decided_at: float = 0.0


# --- bindings (key = pod uid) ---------------------------------------------------------------


class BindingOutcome(enum.StrEnum):
    BOUND = "bound"
    CONFLICT = "conflict"  # the pod is bound elsewhere, or the devices are taken
    FAILED = "failed"  # gave up after retries, or the pod is gone
    UNSCHEDULABLE = "unschedulable"  # the placer found no room; reported on the pod


class BindingEvent(Event, frozen=True, kw_only=True):
    """What the binder did with one placement."""

    decision_id: str
    uid: str
    namespace: str
    name: str
    outcome: BindingOutcome
    node: str = ""
    devices: tuple[DeviceAssignment, ...] = ()
    reason: str = ""
    attempts: int = 1
    finished_at: float = 0.0


# --- <topic>.dlq (key = the original key) ---------------------------------------------------


class DeadLetterEvent(Event, frozen=True, kw_only=True):
    """A message that could not be decoded or handled, with the reason."""

    topic: str
    partition: int
    offset: int
    key: str | None = None
    value: str  # the original bytes, decoded as UTF-8 with replacement; cut to a bound when value_truncated
    error: str  # names the field and the reason
    service: str
    failed_at: float = 0.0
    value_size: int = 0  # bytes of the original value
    value_sha256: str = ""  # hex SHA-256 of the original bytes: finds the original when the value was cut
    value_truncated: bool = False
