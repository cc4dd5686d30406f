"""The parts of Kubernetes objects the cluster watcher reads, decoded once at the edge.

Unknown fields are ignored; a field of the wrong type fails the decode with
msgspec's error, which names the field. The envelope of the replies (lists, watch
events) is topoplace.kube_codec's, read by topoplace.informer.
"""

from __future__ import annotations

from typing import Any

import msgspec

from topoplace.cluster_objects.gangs import SchedulingGroup, WorkloadRef
from topoplace.kube_storage import PodVolume

Quantity = str | int | float  # the API writes strings; hand-made objects sometimes carry numbers


class OwnerReference(msgspec.Struct, kw_only=True, rename="camel"):
    kind: str = ""
    name: str = ""
    controller: bool = False


class ObjectMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []


class ResourceRequirements(msgspec.Struct, kw_only=True):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class ContainerPort(msgspec.Struct, kw_only=True, rename={"host_port": "hostPort", "host_ip": "hostIP"}):
    """What NodePorts reads of a container's port: the host port it takes (0: none), where, which protocol."""

    host_port: int = 0
    host_ip: str = ""
    protocol: str = ""


class Container(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    restart_policy: str | None = None  # "Always" on an init container: a sidecar
    ports: list[ContainerPort] = []


class PodSpec(msgspec.Struct, kw_only=True, rename="camel"):
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: dict[str, Quantity] = {}
    scheduling_gates: list[Any] = []  # a gated pod is not ready to be scheduled
    # Node constraints stay plain JSON here: each is decoded with schemas.kube's
    # checks on its own, so a bad one costs only itself.
    node_selector: dict[str, str] = {}
    affinity: dict[str, Any] | None = None
    tolerations: list[Any] = []
    topology_spread_constraints: list[Any] = []
    resource_claims: list[PodResourceClaim] = []  # DRA claims, by name or by template
    # its scheduling.k8s.io gang, read as `engine place --cluster` reads it
    scheduling_group: SchedulingGroup | None = None  # v1alpha2 / v1beta1
    workload_ref: WorkloadRef | None = None  # v1alpha1
    volumes: list[PodVolume] = []  # only those naming a PersistentVolumeClaim (or an ephemeral one) are read


class PodResourceClaim(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    resource_claim_name: str | None = None  # the claim the controller made from the template


class PodCondition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""
    reason: str = ""


class PodStatus(msgspec.Struct, kw_only=True, rename="camel"):
    phase: str = ""
    start_time: str | None = None
    nominated_node_name: str = ""
    conditions: list[PodCondition] = []
    resource_claim_statuses: list[PodResourceClaimStatus] = []


class Pod(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class NodeCondition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""


class NodeSpec(msgspec.Struct, kw_only=True):
    unschedulable: bool = False
    taints: list[Any] = []  # decoded one by one into schemas.kube.Taint


class ContainerImage(msgspec.Struct, kw_only=True, rename="camel"):
    names: list[str] = []
    size_bytes: int = 0


class NodeStatus(msgspec.Struct, kw_only=True):
    allocatable: dict[str, Quantity] = {}
    capacity: dict[str, Quantity] = {}
    conditions: list[NodeCondition] = []
    images: list[ContainerImage] = []  # ImageLocality: names and sizes


class Node(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class ExactMatch(msgspec.Struct, kw_only=True):
    name: str = ""


class RegexMatch(msgspec.Struct, kw_only=True):
    pattern: str = ""


class LabelSelectorRequirement(msgspec.Struct, kw_only=True):
    key: str = ""
    operator: str = ""
    values: list[str] = []


class LabelSelector(msgspec.Struct, kw_only=True, rename="camel"):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class MemberSelector(msgspec.Struct, kw_only=True, rename="camel"):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None


class HyperNodeMemberSpec(msgspec.Struct, kw_only=True):
    type: str = ""
    selector: MemberSelector = msgspec.field(default_factory=MemberSelector)


class HyperNodeSpec(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    tier: int
    tier_name: str = ""
    members: list[HyperNodeMemberSpec] = []


class HyperNode(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: HyperNodeSpec


# --- Volcano PodGroup (scheduling.volcano.sh/v1beta1) -------------------------------------------


class NetworkTopologySpec(msgspec.Struct, kw_only=True, rename="camel"):
    mode: str = "hard"
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""


class SubGroupPolicySpec(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    sub_group_size: int | None = None
    min_sub_groups: int | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] = []
    network_topology: NetworkTopologySpec | None = None


class PodGroupSpec(msgspec.Struct, kw_only=True, rename="camel"):
    min_member: int = 0
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicySpec] = []


class PodGroup(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)


# --- Kueue Topology (kueue.x-k8s.io/v1beta1, v1beta2) -------------------------------------------


class TopologyLevel(msgspec.Struct, kw_only=True, rename="camel"):
    node_label: str


class TopologySpec(msgspec.Struct, kw_only=True):
    levels: list[TopologyLevel] = []


class Topology(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: TopologySpec = msgspec.field(default_factory=TopologySpec)
