"""The gang objects of a cluster given as Kubernetes objects, by API group, and which gang each pod joins.

- `PodGroup`: Volcano's (`scheduling.volcano.sh`), Kubernetes' own (`scheduling.k8s.io`,
  v1alpha2 / v1beta1) or KAI's (`scheduling.run.ai`), told apart by apiVersion (none: Volcano's).
- `Workload` (`scheduling.k8s.io`): its v1alpha1 `podGroups` and v1alpha2 `podGroupTemplates`.
- `Topology`: Kueue's (`kueue.x-k8s.io`) or KAI's (`kai.scheduler`), its levels' node labels by name.
- `ResourceFlavor` (`kueue.x-k8s.io`): its `spec.nodeLabels` and `spec.topologyName`, so that a pod
  Kueue admitted to a flavor (its nodeSelector holds the flavor's labels) uses that flavor's Topology.
- `Configuration` (`config.kueue.x-k8s.io`, Kueue's manager configuration file): its `featureGates`,
  which a Kueue gang reads (TASBalancedPlacement); a Configuration of another API group is not read.

A pod joins a `scheduling.k8s.io` gang by `spec.schedulingGroup.podGroupName` (v1alpha2 / v1beta1)
or `spec.workloadRef` {name, podGroup, podGroupReplicaKey} (v1alpha1); KAI's by its annotation
`pod-group-name`; Volcano's by `scheduling.k8s.io/group-name`; Kueue's by its pod-group annotations.
"""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.errors import FieldError
from schemas.gangs import PodGroup
from schemas.gangs_kai import KaiPodGroup
from schemas.gangs_kube import KUBE_SCHEDULING_GROUP, KubePodGroup, Workload
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject

GANG_KINDS = ("PodGroup", "Workload", "Topology", "ResourceFlavor")
KUEUE_GROUP_API, KAI_TOPOLOGY_API = "kueue.x-k8s.io", "kai.scheduler"
KUEUE_CONFIG_API = "config.kueue.x-k8s.io"


class _Level(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    node_label: str = ""


class _TopologySpec(msgspec.Struct, frozen=True, kw_only=True):
    levels: tuple[_Level, ...] = ()


class _Named(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""


class _Topology(msgspec.Struct, frozen=True, kw_only=True):
    metadata: _Named = _Named()
    spec: _TopologySpec = _TopologySpec()


class _FlavorSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    node_labels: dict[str, str] = {}
    topology_name: str = ""


class _Flavor(msgspec.Struct, frozen=True, kw_only=True):
    metadata: _Named = _Named()
    spec: _FlavorSpec = _FlavorSpec()


class _KueueConfiguration(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    feature_gates: dict[str, bool] = {}


class FlavorTopology(msgspec.Struct, frozen=True, kw_only=True):
    """A Kueue ResourceFlavor with a Topology: the node labels its pods are pinned to, and the Topology."""

    flavor: str
    node_labels: dict[str, str]
    topology: str


def _group_of(item: ClusterObject) -> str:
    api = item.body.get("apiVersion", "")
    return api.partition("/")[0] if isinstance(api, str) and "/" in api else ""


def _decoded(item: ClusterObject, kind: Any) -> Any:
    try:
        return msgspec.convert(item.body, kind)
    except msgspec.ValidationError as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


class GangObjects(msgspec.Struct, kw_only=True):
    """Every gang object of the files, by namespace/name (Topologies by name: cluster-scoped)."""

    volcano: dict[str, PodGroup] = {}
    kube: dict[str, KubePodGroup] = {}
    workloads: dict[str, Workload] = {}
    kai: dict[str, KaiPodGroup] = {}
    # (API group, Topology name) -> its levels' node labels, top first: Kueue's and KAI's may share a name
    topologies: dict[tuple[str, str], tuple[str, ...]] = {}
    flavors: list[FlavorTopology] = []  # Kueue ResourceFlavors that name a Topology, by name
    kueue_feature_gates: dict[str, bool] | None = None  # Kueue's Configuration `featureGates` (None: none given)

    def reads(self, item: ClusterObject) -> bool:
        """Whether the object is one of these (a Configuration only when it is Kueue's)."""
        return item.kind in GANG_KINDS or (item.kind == "Configuration" and _group_of(item) == KUEUE_CONFIG_API)

    def add(self, item: ClusterObject) -> None:
        group = _group_of(item)
        if item.kind == "Configuration":
            if self.kueue_feature_gates is not None:
                raise ClusterInputError(item.where, "featureGates", "Kueue's Configuration given twice")
            self.kueue_feature_gates = dict(_decoded(item, _KueueConfiguration).feature_gates)
        elif item.kind == "ResourceFlavor":
            flavor = _decoded(item, _Flavor)
            if flavor.spec.topology_name:
                found = FlavorTopology(
                    flavor=flavor.metadata.name, node_labels=flavor.spec.node_labels, topology=flavor.spec.topology_name
                )
                self.flavors = sorted([*self.flavors, found], key=lambda f: f.flavor)
        elif item.kind == "Topology":
            found = _decoded(item, _Topology)
            key = (group, found.metadata.name)
            if key in self.topologies:
                reason = f"Topology {found.metadata.name!r} ({group or 'no API group'}) given twice"
                raise ClusterInputError(item.where, "metadata.name", reason)
            self.topologies[key] = tuple(level.node_label for level in found.spec.levels)
        elif item.kind == "Workload":
            workload = _decoded(item, Workload)
            self.workloads[_key(workload.metadata.namespace, workload.metadata.name)] = workload
        elif group == KUBE_SCHEDULING_GROUP:
            kube = _decoded(item, KubePodGroup)
            self.kube[_key(kube.metadata.namespace, kube.metadata.name)] = kube
        elif group == "scheduling.run.ai":
            kai = _decoded(item, KaiPodGroup)
            self.kai[_key(kai.metadata.namespace, kai.metadata.name)] = kai
        else:
            volcano = _decoded(item, PodGroup)
            self.volcano[_key(volcano.metadata.namespace, volcano.metadata.name)] = volcano


def _key(namespace: str, name: str) -> str:
    return f"{namespace or 'default'}/{name}"


class WorkloadRef(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """A pod's `spec.workloadRef` (v1alpha1)."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str = ""


class SchedulingGroup(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """A pod's `spec.schedulingGroup` (v1alpha2 / v1beta1)."""

    pod_group_name: str = ""


class _LinkSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    scheduling_group: SchedulingGroup | None = None
    workload_ref: WorkloadRef | None = None


class _LinkPod(msgspec.Struct, frozen=True, kw_only=True):
    spec: _LinkSpec = _LinkSpec()


class KubeLink(msgspec.Struct, frozen=True, kw_only=True):
    """How a pod names its `scheduling.k8s.io` gang: a PodGroup, or a v1alpha1 Workload's pod group."""

    pod_group: str = ""  # v1alpha2 / v1beta1: spec.schedulingGroup.podGroupName
    workload: str = ""  # v1alpha1: spec.workloadRef
    workload_group: str = ""
    replica_key: str = ""

    @property
    def group_name(self) -> str:
        """The gang's name: the PodGroup's, or the Workload pod group's as `from_template` names it."""
        if self.pod_group:
            return self.pod_group
        suffix = f"-{self.replica_key}" if self.replica_key else ""
        return f"{self.workload}-{self.workload_group}{suffix}"


def link_of(scheduling_group: SchedulingGroup | None, workload_ref: WorkloadRef | None) -> KubeLink | None:
    """A pod's link to a `scheduling.k8s.io` gang from its spec, or None; FieldError names a bad field."""
    if scheduling_group is not None and scheduling_group.pod_group_name:
        return KubeLink(pod_group=scheduling_group.pod_group_name)
    ref = workload_ref
    if ref is not None and ref.name:
        if not ref.pod_group:
            raise FieldError("spec.workloadRef.podGroup", "must name the Workload's pod group")
        return KubeLink(workload=ref.name, workload_group=ref.pod_group, replica_key=ref.pod_group_replica_key)
    return None


def kube_link(item: ClusterObject) -> KubeLink | None:
    """The pod's link to a `scheduling.k8s.io` gang, or None when it has none."""
    spec = _decoded(item, _LinkPod).spec
    try:
        return link_of(spec.scheduling_group, spec.workload_ref)
    except FieldError as exc:
        raise ClusterInputError(item.where, exc.field, exc.reason) from None
