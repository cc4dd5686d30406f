"""The engine's input and output: an immutable snapshot, a pod's request, a decision.

Everything here is a frozen msgspec Struct so a snapshot can be decoded once
at the edge (Kafka, a JSON file) and trusted inside the engine.
"""

from __future__ import annotations

import enum
from typing import Annotated

import msgspec

from engine.core.hypernodes import HyperNode
from schemas.events import DeviceAssignment
from schemas.events import NodeImage as NodeImage  # the engine's, as nodes.status carries it
from schemas.gangs import PodGroup
from schemas.gangs_kai import KaiPodGroup
from schemas.gangs_kube import KubePodGroup
from schemas.kube import Affinity, HostPort, LabelSelector, PodAffinities, Taint, Toleration, TopologySpreadConstraint
from schemas.topology import Device, Link
from schemas.volumes import CsiVolume, VolumeRules


class Allocation(msgspec.Struct, frozen=True, kw_only=True):
    """One device share held by a pod (bound, or assumed by the placer)."""

    pod_uid: str
    index: int
    memory_mib: int = 0  # 0 = the whole device
    cores: int = 100
    qos: str = ""  # MetaX sGPU QoS policy of the holder (a shared card accepts only its first pod's)
    app_class: str = ""  # MetaX online/offline class of the holder


class PlacedPod(msgspec.Struct, frozen=True, kw_only=True):
    """A pod running on a node, as InterPodAffinity and PodTopologySpread read it: who it is, its labels,
    its pod (anti-)affinity."""

    uid: str
    namespace: str = "default"
    labels: dict[str, str] = {}
    affinities: PodAffinities | None = None
    terminating: bool = False  # being deleted: PodTopologySpread no longer counts it


class Namespace(msgspec.Struct, frozen=True, kw_only=True):
    """A namespace's labels, which affinity terms' namespaceSelector reads."""

    name: str
    labels: dict[str, str] = {}


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    """One node as the engine sees it: devices, links, labels, taints, resources, who holds what."""

    name: str
    machine_type: str = ""
    devices: tuple[Device, ...] = ()  # empty: a node without accelerators
    links: tuple[Link, ...] = ()
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False  # cordoned
    # Kubernetes quantities by resource name (cpu, memory, pods, nvidia.com/gpu...). None: not
    # reported, and then resources are not checked on this node (snapshots from before).
    allocatable: dict[str, str] | None = None
    requested: dict[str, str] = {}  # summed over every pod on the node, any scheduler's
    pods: int = 0  # pods on the node, any scheduler's
    host_ports: tuple[HostPort, ...] = ()  # the host ports its pods hold (NodePorts)
    allocations: tuple[Allocation, ...] = ()
    running: tuple[PlacedPod, ...] = ()  # its pods' labels and pod affinity (InterPodAffinity, PodTopologySpread)
    # cpu and memory summed with kube's scoring defaults (100m, 200Mi) for pods that ask none, which
    # NodeResourcesFit's scores read (kube's NonZeroRequested); empty: `requested` as it is.
    nonzero_requested: dict[str, str] = {}
    images: tuple[NodeImage, ...] = ()  # the images it holds (ImageLocality)
    csi_volume_limits: dict[str, int] = {}  # CSINode: volumes each driver may attach (NodeVolumeLimits)
    csi_volumes: tuple[CsiVolume, ...] = ()  # the CSI volumes its pods use, each once


MILLI = 1_000  # thousandths of one device: a whole device


class WorkloadClass(msgspec.Struct, frozen=True, kw_only=True):
    """One typical pod shape of the cluster's workload, for the `fragmentation` node policy.

    A pod of this class takes `milli` thousandths of each of `gpus` devices
    (1000 = whole, idle devices; 0 devices: a CPU-only pod) and `cpu_milli`
    thousandths of a CPU (0: not known); `weight` is how common the class is
    (only the ratios between classes matter). `models` lists the device models
    it accepts (case-insensitive substrings, as nvidia.com/use-gputype); empty = any.
    """

    gpus: Annotated[int, msgspec.Meta(ge=0)]
    milli: Annotated[int, msgspec.Meta(ge=1, le=MILLI)] = MILLI
    weight: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    models: tuple[str, ...] = ()
    cpu_milli: Annotated[int, msgspec.Meta(ge=0)] = 0


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    nodes: tuple[NodeState, ...]
    hypernodes: tuple[HyperNode, ...] = ()  # Volcano HyperNodes, as `kubectl get hypernodes -o json` prints them
    # Node-label keys of a Kueue / KAI Topology, top level first (the network tree from labels).
    topology_levels: tuple[str, ...] = ()
    # The cluster's typical pod classes; empty = unknown (the fragmentation policy then binpacks).
    workload: tuple[WorkloadClass, ...] = ()
    namespaces: tuple[Namespace, ...] = ()  # their labels, for affinity terms' namespaceSelector


class PodRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A pod as the engine reads it: its effective requests (Kubernetes resource name -> quantity,
    containers summed, init containers and overhead counted), annotations, and node constraints."""

    uid: str
    namespace: str = "default"
    name: str = ""
    requests: dict[str, str] = {}
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()  # the host ports its containers take (NodePorts)
    node_name: str = ""  # set: already on that node (a running gang member), never placed again
    # Resources asked through DRA claims: devices from ResourceSlices, not the node's allocatable.
    dra_resources: tuple[str, ...] = ()
    # Its PersistentVolumeClaims resolved against the cluster (engine.decide.kube.volumes.resolve_volumes).
    volumes: VolumeRules | None = None
    affinities: PodAffinities | None = None  # podAffinity / podAntiAffinity (InterPodAffinity)
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    # The selector of the Services / ReplicaSets / StatefulSets / ReplicationControllers the pod belongs
    # to (kube-scheduler's DefaultSelector): the cluster-default spread constraints count pods by it when
    # the pod has none of its own. None: not known (no default constraints).
    default_spread_selector: LabelSelector | None = None
    images: tuple[str, ...] = ()  # its init containers' and containers' images, one per container (ImageLocality)


class Mode(enum.StrEnum):
    DEFAULT = "default"  # exact optimum, ties broken to protect the remainder
    HAMI = "hami"  # HAMi v2.7's choices, tie-breaking included


class NodeVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """How one node fared: its score if it fits, or why it cannot host the pod."""

    node: str
    fits: bool
    score: float = 0.0
    devices: tuple[int, ...] = ()
    reason: str = ""
    reasons: tuple[str, ...] = ()  # when it does not fit: kube-scheduler's reasons, as it counts them


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    node: str | None
    devices: tuple[DeviceAssignment, ...] = ()
    score: float = 0.0
    score_parts: dict[str, float] = {}
    reason: str = ""  # set when node is None
    alternatives: tuple[NodeVerdict, ...] = ()  # the other nodes, best first
    candidates_considered: int = 0
    warnings: tuple[str, ...] = ()
    qos: str = ""  # the sharing class the pod's devices run in (MetaX sGPU), for its allocations
    app_class: str = ""  # MetaX online/offline class, likewise


class GangInput(msgspec.Struct, frozen=True, kw_only=True):
    """A gang for `topoplace engine place`: Volcano's PodGroup, a `scheduling.k8s.io` PodGroup
    (`workload_group`), KAI's PodGroup (`kai_podgroup`), or none of them: Kueue's pod annotations say it."""

    podgroup: PodGroup | None = None
    workload_group: KubePodGroup | None = None
    kai_podgroup: KaiPodGroup | None = None
    pods: tuple[PodRequest, ...]
    # Volcano's and Kueue's rule: when the whole gang does not fit, place its minimum (false: all or nothing).
    minimum_placement: bool = True
    # Kueue's feature gates, as its Configuration's `featureGates` (or its --feature-gates) names them; read:
    # TASBalancedPlacement (a Kueue pod group with a preferred level is placed balanced across its domains).
    kueue_feature_gates: dict[str, bool] = {}


class PlaceInput(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot file for `topoplace engine place`: the cluster, and one pod (`request`) or a `gang`."""

    snapshot: Snapshot
    request: PodRequest | None = None
    gang: GangInput | None = None
