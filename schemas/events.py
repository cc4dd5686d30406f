"""Every event on every topic, as one msgspec Struct per topic.

JSON on the wire. Each event carries `schema_version`; a consumer rejects a
version it does not know into the topic's DLQ instead of guessing.
"""

from __future__ import annotations

import enum

import msgspec

from schemas.topology import Device, Link

SCHEMA_VERSION = 1


class Event(msgspec.Struct, frozen=True, kw_only=True):
    schema_version: int = SCHEMA_VERSION


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
    ready: bool = True
    unschedulable: bool = False  # cordoned
    deleted: bool = False
    resource_version: str = ""
    observed_at: float = 0.0


# --- topology.network (compacted, key = hypernode) ------------------------------------------


class MemberKind(enum.StrEnum):
    NODE = "node"
    HYPERNODE = "hypernode"


class HyperNodeMember(msgspec.Struct, frozen=True, kw_only=True):
    kind: MemberKind
    name: str


class HyperNodeEvent(Event, frozen=True, kw_only=True):
    """One level of the network tree: tier 1 = closest (a ToR), higher tiers wrap lower ones."""

    name: str
    tier: int
    members: tuple[HyperNodeMember, ...]
    deleted: bool = False
    observed_at: float = 0.0


# --- pods.pending (key = pod uid, or gang id) -----------------------------------------------


class GangRef(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # "<namespace>/<group name>"
    min_member: int = 1


class PendingPodEvent(Event, frozen=True, kw_only=True):
    """A pod that names our scheduler and has no node yet."""

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
    """A pod of ours bound to a node (its devices now in use) or deleted (its devices free)."""

    uid: str
    namespace: str
    name: str
    phase: LifecyclePhase
    node: str = ""
    devices: tuple[DeviceAssignment, ...] = ()
    qos: str = ""
    app_class: str = ""
    observed_at: float = 0.0


# --- placements (key = node) ----------------------------------------------------------------


class PlacementOutcome(enum.StrEnum):
    PLACED = "placed"
    UNSCHEDULABLE = "unschedulable"


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
