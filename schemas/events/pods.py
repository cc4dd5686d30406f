"""Events about pods: pods.pending, pods.lifecycle (and the device assignment both carry)."""

from __future__ import annotations

import enum
from typing import ClassVar

import msgspec

from schemas.dra import ContainerRequests, PodClaim
from schemas.events.base import MAX_POD_EVENT_BYTES, Event
from schemas.kube import Affinity, HostPort, LabelSelector, PodAffinities, Toleration, TopologySpreadConstraint

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
    priority: int = 0  # spec.priority, as the API server's Priority admission resolved it
    preemption_policy: str = "PreemptLowerPriority"  # spec.preemptionPolicy ("Never": waits, never preempts)
    nominated_node: str = ""  # status.nominatedNodeName: a preemption made room for the pod there
    created_at: float = 0.0
    observed_at: float = 0.0
    # Node constraints, as the pod spec gives them (kube-scheduler's filters read them).
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()  # its containers' and sidecars' ports with a hostPort (NodePorts)
    claims: tuple[PodClaim, ...] = ()  # DRA: the pod's ResourceClaims, with their requests
    # Each container's requests (init containers first) when one asks an extended resource: a DeviceClass
    # may serve it through DRA on a node whose device plugin does not publish it (KEP-5004).
    containers: tuple[ContainerRequests, ...] = ()
    # InterPodAffinity and PodTopologySpread: its podAffinity / podAntiAffinity (None: neither), its
    # topologySpreadConstraints, and kube-scheduler's DefaultSelector for it (the selectors of the
    # Services and the controller it belongs to; None: empty, so no cluster-default constraints).
    affinities: PodAffinities | None = None
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    default_spread_selector: LabelSelector | None = None
    volume_claims: tuple[str, ...] = ()  # names of its PersistentVolumeClaims (persistentVolumeClaim, ephemeral)
    images: tuple[str, ...] = ()  # its init containers' and containers' images, one per container (ImageLocality)
    unpublishable: str = ""  # why the pod could not be published whole (then nothing else is carried)


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
    # What InterPodAffinity and PodTopologySpread read of a pod on a node: its labels (which
    # PodDisruptionBudgets select by too), its pod (anti-)affinity, and whether it is being
    # deleted (spread no longer counts it).
    labels: dict[str, str] = {}
    affinities: PodAffinities | None = None
    terminating: bool = False
    volume_claims: tuple[str, ...] = ()  # names of the PersistentVolumeClaims it mounts (ReadWriteOncePod in use)
    host_ports: tuple[HostPort, ...] = ()  # the host ports it takes on its node (NodePorts)
    observed_at: float = 0.0
    # What preemption weighs a running pod by: spec.priority, status.startTime (seconds since the
    # epoch; 0: not started), and whether it is already being deleted by a preemption
    # (deletionTimestamp with DisruptionTarget). PodDisruptionBudgets select by `labels` above.
    priority: int = 0
    started_at: float = 0.0
    terminating_by_preemption: bool = False
