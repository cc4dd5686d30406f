"""The kinds of API object the cluster watcher lists and watches: one row each.

A row says how to list the kind (its informers: the first version the cluster serves is
watched), which tracker turns its objects into events (and so which topic they go to), which
of its objects count (the rest are reported gone), whether the cluster may lack it (a CRD or
an API group: absent, the watcher is ready without it and asks again at every resync), and
which compacted topic seeds its tracker at start. ClusterWatcher runs, gates readiness on and
seeds exactly the rows of WATCHED_KINDS.

A new watched kind is one row here plus its translation (its object Structs in objects.py,
object -> event in translate.py or a module of its own, a KeyedTracker factory).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, TypeVar

from kubernetes_asyncio import client
from kubernetes_asyncio.client import CustomObjectsApi

from schemas import topics
from schemas.events import (
    AllocatedClaimEvent,
    CsiNodeEvent,
    DeviceClassEvent,
    DeviceTaintRuleEvent,
    DisruptionBudgetEvent,
    Event,
    HyperNodeEvent,
    LifecyclePhase,
    NamespaceEvent,
    NodeStatusEvent,
    PersistentVolumeEvent,
    PodLifecycleEvent,
    ResourceSliceEvent,
    StorageClassEvent,
    TopologyLevelsEvent,
    VolumeClaimEvent,
)
from schemas.gangs_kai import KaiPodGroup
from schemas.gangs_kube import KUBE_SCHEDULING_GROUP, KubePodGroup
from schemas.gangs_kube import Workload as SchedulingWorkload
from schemas.seal import DecisionKey
from services.collector.cluster import (
    compute_domains,
    disruption,
    dra,
    kai,
    kai_topologies,
    storage,
    trackers,
    workload_api,
    workloads,
)
from services.collector.cluster.compute_domains import COMPUTE_DOMAIN_GROUP, COMPUTE_DOMAIN_VERSIONS, COMPUTE_DOMAINS
from services.collector.cluster.kai import KAI_GROUP, KAI_PODGROUPS, KAI_VERSIONS
from services.collector.cluster.kai_topologies import KAI_TOPOLOGIES, KAI_TOPOLOGY_GROUP, KAI_TOPOLOGY_VERSIONS
from services.collector.cluster.node_devices import NodeObjects, NodeTopologyTracker
from services.collector.cluster.objects import HyperNode, Node, Pod, PodGroup, Topology
from services.collector.cluster.pod_feeds import ClaimsOfPods, PodGroupsOfPods
from services.collector.cluster.trackers import PodTracker
from services.collector.cluster.watched_kind import WatchedKind, keyed_seed
from services.collector.cluster.workload_api import KUBE_PODGROUPS, PODGROUP_VERSIONS, WORKLOAD_VERSIONS, WORKLOADS
from topoplace.kube_storage import ClaimObject, CsiNodeObject, StorageClassObject, VolumeObject

T = TypeVar("T")
E = TypeVar("E", bound=Event)

DRA_GROUP = "resource.k8s.io"
VOLCANO_GROUP, VOLCANO_VERSION, HYPERNODES = "topology.volcano.sh", "v1alpha1", "hypernodes"
PODGROUP_GROUP, PODGROUP_VERSION, PODGROUPS = "scheduling.volcano.sh", "v1beta1", "podgroups"
KUEUE_GROUP, TOPOLOGIES = "kueue.x-k8s.io", "topologies"
KUEUE_TOPOLOGY_VERSIONS = ("v1beta2", "v1beta1")  # the first one served is watched
DEVICE_TAINT_RULES, DEVICE_TAINT_RULE_VERSIONS = "devicetaintrules", ("v1", "v1beta2", "v1alpha3")


class Trackers:
    """The watcher's memory of what it published, one tracker per topic it writes."""

    def __init__(self, scheduler_name: str, decision_key: DecisionKey | None) -> None:
        self.pods = PodTracker(scheduler_name, decision_key)
        self.podgroups = PodGroupsOfPods(self.pods)
        self.workload_api = workload_api.WorkloadApiGangs(self.pods)  # scheduling.k8s.io Workloads, PodGroups
        self.kai_podgroups = kai.KaiPodGroupsOfPods(self.pods)
        self.nodes = trackers.node_tracker()
        self.node_devices = NodeTopologyTracker()  # Neuron and MetaX nodes' devices, from the Node
        self.node_objects = NodeObjects(self.nodes, self.node_devices)
        self.hypernodes = trackers.hypernode_tracker()
        self.topologies = trackers.topology_tracker()
        self.kai_topologies = kai_topologies.kai_topology_tracker()
        self.slices = dra.slice_tracker()
        self.claims = dra.allocated_claim_tracker()
        self.namespaces = workloads.namespace_tracker()
        # the workloads behind a pod's DefaultSelector: kept for the pending pods, not published
        self.services = workloads.SelectorsOfPods("Service", self.pods)
        self.replication_controllers = workloads.SelectorsOfPods("ReplicationController", self.pods)
        self.replica_sets = workloads.SelectorsOfPods("ReplicaSet", self.pods)
        self.stateful_sets = workloads.SelectorsOfPods("StatefulSet", self.pods)
        self.claims_of_pods = ClaimsOfPods(self.claims, self.pods)
        self.classes = dra.class_tracker()
        self.taint_rules = dra.taint_rule_tracker()
        self.compute_domains = compute_domains.ComputeDomainsOfPods(self.pods)  # kept for the pending pods
        self.volume_claims = storage.claim_tracker()
        self.volumes = storage.volume_tracker()
        self.storage_classes = storage.class_tracker()
        self.csi_nodes = storage.csi_node_tracker()
        self.budgets = disruption.budget_tracker()


def _seed_pods(t: Trackers, events: Sequence[Event]) -> None:
    t.pods.seed(e for e in events if isinstance(e, PodLifecycleEvent) and e.phase is LifecyclePhase.BOUND)


def _name(obj: Pod | Node | HyperNode | Topology | dra.ResourceSlice) -> str:
    return obj.metadata.name


# Each row's list calls are written in the row itself, with their group and plural as constants:
# tests/contract/deploy_kube_calls.py reads them there to check that deploy/'s RBAC grants list and watch.
WATCHED_KINDS: tuple[WatchedKind[Any], ...] = (
    WatchedKind[Pod](
        "pods",  # every scheduler's pods: their requests fill the nodes
        Pod,
        lambda api: [("pods", client.CoreV1Api(api).list_pod_for_all_namespaces)],
        lambda t: t.pods,
        lambda pod: pod.metadata.uid,
        seed=_seed_pods,
        seeded_from=topics.PODS_LIFECYCLE,
    ),
    WatchedKind[Node](
        "nodes",
        Node,
        lambda api: [("nodes", client.CoreV1Api(api).list_node)],
        lambda t: t.node_objects,  # nodes.status, and topology.nodes for a Neuron or MetaX node (node_devices.py)
        _name,
        seed=keyed_seed(lambda t: t.nodes, NodeStatusEvent, lambda e: e.node),
        seeded_from=topics.NODES_STATUS,
    ),
    WatchedKind[HyperNode](
        "hypernodes",
        HyperNode,
        lambda api: [
            (
                HYPERNODES,
                partial(CustomObjectsApi(api).list_cluster_custom_object, VOLCANO_GROUP, VOLCANO_VERSION, HYPERNODES),
            )
        ],
        lambda t: t.hypernodes,
        _name,
        api_group=VOLCANO_GROUP,
        seed=keyed_seed(lambda t: t.hypernodes, HyperNodeEvent, lambda e: e.name),
        seeded_from=topics.TOPOLOGY_NETWORK,
        from_file=True,
    ),
    WatchedKind[PodGroup](
        "podgroups",
        PodGroup,
        lambda api: [
            (
                PODGROUPS,
                partial(CustomObjectsApi(api).list_cluster_custom_object, PODGROUP_GROUP, PODGROUP_VERSION, PODGROUPS),
            )
        ],
        lambda t: t.podgroups,
        lambda group: f"{group.metadata.namespace}/{group.metadata.name}",
        api_group=PODGROUP_GROUP,
    ),
    WatchedKind[SchedulingWorkload](
        "workloads",  # scheduling.k8s.io: their pod groups' policies (v1alpha1), their templates
        SchedulingWorkload,
        lambda api: [
            (
                f"{WORKLOADS}.{version}",
                partial(CustomObjectsApi(api).list_cluster_custom_object, KUBE_SCHEDULING_GROUP, version, WORKLOADS),
            )
            for version in WORKLOAD_VERSIONS
        ],
        lambda t: t.workload_api.workloads,
        workload_api.object_key,
        api_group=KUBE_SCHEDULING_GROUP,
    ),
    WatchedKind[KubePodGroup](
        "scheduling-podgroups",  # scheduling.k8s.io PodGroups: the gangs' policies
        KubePodGroup,
        lambda api: [
            (
                f"{KUBE_PODGROUPS}.{version}",
                partial(
                    CustomObjectsApi(api).list_cluster_custom_object, KUBE_SCHEDULING_GROUP, version, KUBE_PODGROUPS
                ),
            )
            for version in PODGROUP_VERSIONS
        ],
        lambda t: t.workload_api.podgroups,
        workload_api.object_key,
        api_group=KUBE_SCHEDULING_GROUP,
    ),
    WatchedKind[KaiPodGroup](
        "kai-podgroups",  # KAI's PodGroups: the gangs' policies
        KaiPodGroup,
        lambda api: [
            (
                f"{KAI_PODGROUPS}.{version}",
                partial(CustomObjectsApi(api).list_cluster_custom_object, KAI_GROUP, version, KAI_PODGROUPS),
            )
            for version in KAI_VERSIONS
        ],
        lambda t: t.kai_podgroups,
        kai.podgroup_key,
        api_group=KAI_GROUP,
    ),
    WatchedKind[Topology](
        "topologies",
        Topology,
        lambda api: [
            (
                f"{TOPOLOGIES}.{version}",
                partial(CustomObjectsApi(api).list_cluster_custom_object, KUEUE_GROUP, version, TOPOLOGIES),
            )
            for version in KUEUE_TOPOLOGY_VERSIONS
        ],
        lambda t: t.topologies,
        _name,
        api_group=KUEUE_GROUP,
        seed=keyed_seed(lambda t: t.topologies, TopologyLevelsEvent, lambda e: e.name),
        seeded_from=topics.TOPOLOGY_LEVELS,
    ),
    WatchedKind[Topology](
        "kai-topologies",  # KAI's Topologies: the same levels, under kai.scheduler/<name>
        Topology,
        lambda api: [
            (
                f"{KAI_TOPOLOGIES}.{KAI_TOPOLOGY_GROUP}.{version}",
                partial(CustomObjectsApi(api).list_cluster_custom_object, KAI_TOPOLOGY_GROUP, version, KAI_TOPOLOGIES),
            )
            for version in KAI_TOPOLOGY_VERSIONS
        ],
        lambda t: t.kai_topologies,
        kai_topologies.levels_name,
        api_group=KAI_TOPOLOGY_GROUP,
        seed=keyed_seed(lambda t: t.kai_topologies, TopologyLevelsEvent, lambda e: e.name),
        seeded_from=topics.TOPOLOGY_LEVELS,
    ),
    WatchedKind[dra.ResourceSlice](
        "resourceslices",
        dra.ResourceSlice,
        lambda api: [("resourceslices", client.ResourceV1Api(api).list_resource_slice)],
        lambda t: t.slices,
        _name,
        api_group=DRA_GROUP,
        seed=keyed_seed(lambda t: t.slices, ResourceSliceEvent, lambda e: e.name),
        seeded_from=topics.RESOURCE_SLICES,
    ),
    WatchedKind[dra.ResourceClaim](
        "resourceclaims",  # every scheduler's claims: their devices are taken
        dra.ResourceClaim,
        lambda api: [("resourceclaims", client.ResourceV1Api(api).list_resource_claim_for_all_namespaces)],
        lambda t: t.claims_of_pods,
        lambda claim: claim.metadata.uid,
        api_group=DRA_GROUP,
        seed=keyed_seed(lambda t: t.claims, AllocatedClaimEvent, lambda e: e.uid),
        seeded_from=topics.RESOURCE_CLAIMS,
    ),
    WatchedKind[workloads.Namespace](
        "namespaces",  # their labels: pod affinity's namespaceSelector
        workloads.Namespace,
        lambda api: [("namespaces", client.CoreV1Api(api).list_namespace)],
        lambda t: t.namespaces,
        lambda ns: ns.metadata.name,
        seed=keyed_seed(lambda t: t.namespaces, NamespaceEvent, lambda e: e.name),
        seeded_from=topics.NAMESPACES,
    ),
    WatchedKind[workloads.Workload](
        "services",  # the Services selecting a pod: its DefaultSelector
        workloads.Workload,
        lambda api: [("services", client.CoreV1Api(api).list_service_for_all_namespaces)],
        lambda t: t.services,
        workloads.workload_key,
    ),
    WatchedKind[workloads.Workload](
        "replicationcontrollers",
        workloads.Workload,
        lambda api: [("replicationcontrollers", client.CoreV1Api(api).list_replication_controller_for_all_namespaces)],
        lambda t: t.replication_controllers,
        workloads.workload_key,
    ),
    WatchedKind[workloads.Workload](
        "replicasets",
        workloads.Workload,
        lambda api: [("replicasets", client.AppsV1Api(api).list_replica_set_for_all_namespaces)],
        lambda t: t.replica_sets,
        workloads.workload_key,
    ),
    WatchedKind[workloads.Workload](
        "statefulsets",
        workloads.Workload,
        lambda api: [("statefulsets", client.AppsV1Api(api).list_stateful_set_for_all_namespaces)],
        lambda t: t.stateful_sets,
        workloads.workload_key,
    ),
    WatchedKind[dra.DeviceClass](
        "deviceclasses",  # their selectors and config take part in every allocation
        dra.DeviceClass,
        lambda api: [("deviceclasses", client.ResourceV1Api(api).list_device_class)],
        lambda t: t.classes,
        lambda device_class: device_class.metadata.name,
        api_group=DRA_GROUP,
        seed=keyed_seed(lambda t: t.classes, DeviceClassEvent, lambda e: e.name),
        seeded_from=topics.RESOURCE_CLASSES,
    ),
    WatchedKind[dra.DeviceTaintRule](
        "devicetaintrules",  # their taints are added to the devices they select
        dra.DeviceTaintRule,
        lambda api: [
            (
                f"{DEVICE_TAINT_RULES}.{version}",
                partial(CustomObjectsApi(api).list_cluster_custom_object, DRA_GROUP, version, DEVICE_TAINT_RULES),
            )
            for version in DEVICE_TAINT_RULE_VERSIONS
        ],
        lambda t: t.taint_rules,
        lambda rule: rule.metadata.name,
        api_group=DRA_GROUP,
        seed=keyed_seed(lambda t: t.taint_rules, DeviceTaintRuleEvent, lambda e: e.name),
        seeded_from=topics.RESOURCE_TAINT_RULES,
    ),
    WatchedKind[compute_domains.ComputeDomain](
        "computedomains",  # NVIDIA's: a gang whose claims come from a domain's channel template stays in one clique
        compute_domains.ComputeDomain,
        lambda api: [
            (
                f"{COMPUTE_DOMAINS}.{version}",
                partial(
                    CustomObjectsApi(api).list_cluster_custom_object, COMPUTE_DOMAIN_GROUP, version, COMPUTE_DOMAINS
                ),
            )
            for version in COMPUTE_DOMAIN_VERSIONS
        ],
        lambda t: t.compute_domains,
        compute_domains.domain_key,
        api_group=COMPUTE_DOMAIN_GROUP,
    ),
    WatchedKind[ClaimObject](
        "persistentvolumeclaims",
        ClaimObject,
        lambda api: [("persistentvolumeclaims", client.CoreV1Api(api).list_persistent_volume_claim_for_all_namespaces)],
        lambda t: t.volume_claims,
        storage.claim_key,
        seed=keyed_seed(lambda t: t.volume_claims, VolumeClaimEvent, lambda e: e.claim.key),
        seeded_from=topics.STORAGE_CLAIMS,
    ),
    WatchedKind[VolumeObject](
        "persistentvolumes",
        VolumeObject,
        lambda api: [("persistentvolumes", client.CoreV1Api(api).list_persistent_volume)],
        lambda t: t.volumes,
        lambda volume: volume.metadata.name,
        seed=keyed_seed(lambda t: t.volumes, PersistentVolumeEvent, lambda e: e.volume.name),
        seeded_from=topics.STORAGE_VOLUMES,
    ),
    WatchedKind[StorageClassObject](
        "storageclasses",
        StorageClassObject,
        lambda api: [("storageclasses", client.StorageV1Api(api).list_storage_class)],
        lambda t: t.storage_classes,
        lambda storage_class: storage_class.metadata.name,
        seed=keyed_seed(lambda t: t.storage_classes, StorageClassEvent, lambda e: e.storage_class.name),
        seeded_from=topics.STORAGE_CLASSES,
    ),
    WatchedKind[CsiNodeObject](
        "csinodes",  # each node's CSI attach limits (NodeVolumeLimits)
        CsiNodeObject,
        lambda api: [("csinodes", client.StorageV1Api(api).list_csi_node)],
        lambda t: t.csi_nodes,
        lambda csi_node: csi_node.metadata.name,
        seed=keyed_seed(lambda t: t.csi_nodes, CsiNodeEvent, lambda e: e.node),
        seeded_from=topics.STORAGE_CSINODES,
    ),
    WatchedKind[disruption.PodDisruptionBudget](
        "poddisruptionbudgets",  # what preemption must respect
        disruption.PodDisruptionBudget,
        lambda api: [("poddisruptionbudgets", client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces)],
        lambda t: t.budgets,
        disruption.budget_key,
        seed=keyed_seed(lambda t: t.budgets, DisruptionBudgetEvent, lambda e: e.key),
        seeded_from=topics.DISRUPTION_BUDGETS,
    ),
)
# The compacted topics whose records seed the trackers at start, in the table's order.
SEEDED_TOPICS: tuple[topics.Topic, ...] = tuple(  # once each: Kueue's and KAI's Topologies share topology.levels
    {k.seeded_from.name: k.seeded_from for k in WATCHED_KINDS if k.seeded_from is not None}.values()
)
