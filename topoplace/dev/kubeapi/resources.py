"""The resource types the test API serves, and where each lives in the URL space."""

from __future__ import annotations

from topoplace.dev.kubeapi.resource_type import ResourceType as ResourceType

_META = frozenset({"metadata.name", "metadata.namespace"})

PODS = ResourceType(
    plural="pods",
    kind="Pod",
    group="",
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META
    | {
        "spec.nodeName",
        "spec.schedulerName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    short_names=("po",),
    categories=("all",),
)
NODES = ResourceType(
    plural="nodes",
    kind="Node",
    group="",
    version="v1",
    namespaced=False,
    has_status=True,
    field_labels=_META | {"spec.unschedulable"},
    short_names=("no",),
)
_EVENT_FIELDS = _META | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}
CORE_EVENTS = ResourceType(
    plural="events",
    kind="Event",
    group="",
    version="v1",
    namespaced=True,
    has_status=False,
    field_labels=_EVENT_FIELDS,
    short_names=("ev",),
)
EVENTS_V1 = ResourceType(
    plural="events",
    kind="Event",
    group="events.k8s.io",
    version="v1",
    namespaced=True,
    has_status=False,
    field_labels=_META | {"reason", "type", "reportingController", "regarding.kind", "regarding.name"},
    short_names=("ev",),
)
HYPERNODES = ResourceType(
    plural="hypernodes",
    kind="HyperNode",
    group="topology.volcano.sh",
    version="v1alpha1",
    namespaced=False,
    has_status=True,
    field_labels=_META,
    custom=True,
    short_names=("hn",),
)

PODGROUPS = ResourceType(
    plural="podgroups",
    kind="PodGroup",
    group="scheduling.volcano.sh",
    version="v1beta1",
    namespaced=True,
    has_status=True,
    field_labels=_META,
    custom=True,
    short_names=("pg", "podgroup-v1beta1"),
)
# Kubernetes' Workload API (built in, alpha: KEP-4671): Workloads and PodGroups of v1alpha2 (1.36),
# the layout topoplace reads (podGroupTemplates, schedulingPolicy); v1alpha1's is kept as written.
KUBE_WORKLOADS = ResourceType(
    plural="workloads",
    kind="Workload",
    group="scheduling.k8s.io",
    version="v1alpha2",
    namespaced=True,
    has_status=False,
    field_labels=_META,
)
KUBE_PODGROUPS = ResourceType(
    plural="podgroups",
    kind="PodGroup",
    group="scheduling.k8s.io",
    version="v1alpha2",
    namespaced=True,
    has_status=True,
    field_labels=_META,
)
# NVIDIA KAI scheduler's PodGroup CRD.
KAI_PODGROUPS = ResourceType(
    plural="podgroups",
    kind="PodGroup",
    group="scheduling.run.ai",
    version="v2alpha2",
    namespaced=True,
    has_status=True,
    field_labels=_META,
    custom=True,
)
# Kueue serves Topology as v1beta2 (the storage version) and v1beta1, one schema.
TOPOLOGIES = ResourceType(
    plural="topologies",
    kind="Topology",
    group="kueue.x-k8s.io",
    version="v1beta2",
    other_versions=("v1beta1",),
    namespaced=False,
    has_status=False,
    field_labels=_META,
    custom=True,
)
# NVIDIA KAI scheduler's Topology CRD: levels as Kueue's, cluster-scoped.
KAI_TOPOLOGIES = ResourceType(
    plural="topologies",
    kind="Topology",
    group="kai.scheduler",
    version="v1alpha1",
    namespaced=False,
    has_status=False,
    field_labels=_META,
    custom=True,
)
# NVIDIA's DRA driver's ComputeDomain CRD: its channel's claim template keeps a gang in one NVLink clique.
COMPUTEDOMAINS = ResourceType(
    plural="computedomains",
    kind="ComputeDomain",
    group="resource.nvidia.com",
    version="v1beta1",
    namespaced=True,
    has_status=True,
    field_labels=_META,
    custom=True,
)
_DRA = "resource.k8s.io"
RESOURCESLICES = ResourceType(
    plural="resourceslices",
    kind="ResourceSlice",
    group=_DRA,
    version="v1",
    namespaced=False,
    has_status=False,
    field_labels=_META | {"spec.nodeName", "spec.driver"},
)
RESOURCECLAIMS = ResourceType(
    plural="resourceclaims",
    kind="ResourceClaim",
    group=_DRA,
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META,
)
RESOURCECLAIMTEMPLATES = ResourceType(
    plural="resourceclaimtemplates",
    kind="ResourceClaimTemplate",
    group=_DRA,
    version="v1",
    namespaced=True,
    has_status=False,
    field_labels=_META,
)
DEVICECLASSES = ResourceType(
    plural="deviceclasses",
    kind="DeviceClass",
    group=_DRA,
    version="v1",
    namespaced=False,
    has_status=False,
    field_labels=_META,
)
PERSISTENTVOLUMECLAIMS = ResourceType(
    plural="persistentvolumeclaims",
    kind="PersistentVolumeClaim",
    group="",
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META,
    short_names=("pvc",),
)
PERSISTENTVOLUMES = ResourceType(
    plural="persistentvolumes",
    kind="PersistentVolume",
    group="",
    version="v1",
    namespaced=False,
    has_status=True,
    field_labels=_META,
    short_names=("pv",),
)
STORAGECLASSES = ResourceType(
    plural="storageclasses",
    kind="StorageClass",
    group="storage.k8s.io",
    version="v1",
    namespaced=False,
    has_status=False,
    field_labels=_META,
    short_names=("sc",),
)
CSINODES = ResourceType(
    plural="csinodes",
    kind="CSINode",
    group="storage.k8s.io",
    version="v1",
    namespaced=False,
    has_status=False,
    field_labels=_META,
)

LEASES = ResourceType(
    plural="leases",
    kind="Lease",
    group="coordination.k8s.io",
    version="v1",
    namespaced=True,
    has_status=False,
    field_labels=_META,
)
# What a pod's pod affinity (namespaceSelector) and its default spread selector read.
NAMESPACES = ResourceType(
    plural="namespaces",
    kind="Namespace",
    group="",
    version="v1",
    namespaced=False,
    has_status=True,
    field_labels=_META - {"metadata.namespace"} | {"status.phase"},
    short_names=("ns",),
)
SERVICES = ResourceType(
    plural="services",
    kind="Service",
    group="",
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META | {"spec.clusterIP", "spec.type"},
    short_names=("svc",),
    categories=("all",),
)
REPLICATIONCONTROLLERS = ResourceType(
    plural="replicationcontrollers",
    kind="ReplicationController",
    group="",
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META | {"status.replicas"},
    short_names=("rc",),
    categories=("all",),
)
REPLICASETS = ResourceType(
    plural="replicasets",
    kind="ReplicaSet",
    group="apps",
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META | {"status.replicas"},
    short_names=("rs",),
    categories=("all",),
)
STATEFULSETS = ResourceType(
    plural="statefulsets",
    kind="StatefulSet",
    group="apps",
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META | {"status.successful"},
    short_names=("sts",),
    categories=("all",),
)
# GA in resource.k8s.io/v1 (Kubernetes 1.37); v1beta2 and v1alpha3 before, one schema.
DEVICETAINTRULES = ResourceType(
    plural="devicetaintrules",
    kind="DeviceTaintRule",
    group=_DRA,
    version="v1",
    other_versions=("v1beta2", "v1alpha3"),
    namespaced=False,
    has_status=False,
    field_labels=_META,
)
PRIORITYCLASSES = ResourceType(
    plural="priorityclasses",
    kind="PriorityClass",
    group="scheduling.k8s.io",
    version="v1",
    namespaced=False,
    has_status=False,
    field_labels=_META,
    short_names=("pc",),
)
PODDISRUPTIONBUDGETS = ResourceType(
    plural="poddisruptionbudgets",
    kind="PodDisruptionBudget",
    group="policy",
    version="v1",
    namespaced=True,
    has_status=True,
    field_labels=_META,
    short_names=("pdb",),
)

ALL: tuple[ResourceType, ...] = (
    PODS,
    NODES,
    CORE_EVENTS,
    EVENTS_V1,
    HYPERNODES,
    PODGROUPS,
    KUBE_WORKLOADS,
    KUBE_PODGROUPS,
    KAI_PODGROUPS,
    TOPOLOGIES,
    KAI_TOPOLOGIES,
    RESOURCESLICES,
    RESOURCECLAIMS,
    RESOURCECLAIMTEMPLATES,
    DEVICECLASSES,
    DEVICETAINTRULES,
    COMPUTEDOMAINS,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    STORAGECLASSES,
    CSINODES,
    LEASES,
    NAMESPACES,
    SERVICES,
    REPLICATIONCONTROLLERS,
    REPLICASETS,
    STATEFULSETS,
    PRIORITYCLASSES,
    PODDISRUPTIONBUDGETS,
)
BY_KEY: dict[str, ResourceType] = {r.key: r for r in ALL}
