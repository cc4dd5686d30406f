"""A cluster given as Kubernetes objects -> the engine's Snapshot, and the pods to place.

Nodes and Pods are used now, Namespaces (their labels) and Services,
ReplicationControllers, ReplicaSets and StatefulSets (their selectors, for the
cluster-default spread constraints: workloads.py), PersistentVolumeClaims,
PersistentVolumes, StorageClasses and CSINodes for the pods' volumes (storage.py), for a
gang its PodGroup (Volcano's, `scheduling.k8s.io`'s or KAI's), Workloads, Kueue's
and KAI's Topologies (gangs.py) and the HyperNodes, for preemption PriorityClasses
and PodDisruptionBudgets (priority.py), and for a pod's ResourceClaims the DRA
objects (dra.py); every other kind is accepted and left aside, named once in a note
(`not yet used: PersistentVolumeClaim`), never an error. A Pod
with `spec.nodeName` that has not finished is running there and counts against
its node; a Pod without one is pending and is not counted (kube-scheduler
counts only pods on nodes).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine import NodeState, PodRequest, Snapshot
from engine.cluster.network import decode_hypernodes
from engine.core.hypernodes import HyperNode
from engine.decide.kube.volumes import resolve_volumes
from engine.decide.preempt import DisruptionBudget
from engine.decide.preempt import RunningPod as PreemptiblePod
from schemas.pod_requests import format_quantity
from schemas.volumes import VolumeCatalog
from services.collector.cluster import translate
from topoplace.cluster_objects.dra import DRA_KINDS, DraObjects
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject, read_objects
from topoplace.cluster_objects.gangs import GangObjects
from topoplace.cluster_objects.nodes import merged, node_from_object, with_pods
from topoplace.cluster_objects.pods import RunningPod, decode_pod, pod_to_place, running_pod
from topoplace.cluster_objects.priority import (
    Priorities,
    PriorityClass,
    budget,
    nomination,
    priority_class,
    running_for_preemption,
)
from topoplace.cluster_objects.storage import (
    STORAGE_KINDS,
    attached_volumes,
    catalog_of,
    csi_limits,
    pod_claim_names,
)
from topoplace.cluster_objects.workloads import WORKLOAD_KINDS, WorkloadSelectors


class ClusterRead(msgspec.Struct, frozen=True, kw_only=True):
    snapshot: Snapshot
    notes: tuple[str, ...]  # for stderr: kinds not used yet, devices read without their seal
    gangs: GangObjects = msgspec.field(default_factory=GangObjects)  # PodGroups, Workloads, Topologies
    # For preemption: the running pods (priority, start, devices), PodDisruptionBudgets, PriorityClasses.
    running: tuple[PreemptiblePod, ...] = ()
    nominated: tuple[PreemptiblePod, ...] = ()  # pending pods nominated to a node (RunningPod.node: that node)
    budgets: tuple[DisruptionBudget, ...] = ()
    priority_classes: tuple[PriorityClass, ...] = ()
    volumes: VolumeCatalog = VolumeCatalog()  # claims, volumes and classes, for the pods' volumes
    workloads: WorkloadSelectors = msgspec.field(default_factory=WorkloadSelectors)
    dra: DraObjects = msgspec.field(default_factory=DraObjects)  # ResourceSlices, DeviceClasses, ResourceClaims


def _unused_note(kinds: list[str]) -> list[str]:
    unique = sorted(set(kinds))
    return [f"not yet used: {kind} (its objects are ignored)" for kind in unique]


def read_cluster(paths: Sequence[str], snapshot_nodes: Sequence[NodeState] = ()) -> ClusterRead:
    """The cluster of these files, its nodes' devices from `snapshot_nodes` where they name them.

    Raises ClusterInputError naming the file and the field."""
    notes: list[str] = []
    unused: list[str] = []
    nodes: dict[str, NodeState] = {}
    running: dict[str, list[RunningPod]] = {}
    pod_names: set[str] = set()
    hypernodes: list[HyperNode] = []
    gangs = GangObjects()
    bound: list[tuple[ClusterObject, RunningPod]] = []
    pending: list[tuple[ClusterObject, RunningPod]] = []
    classes: list[PriorityClass] = []
    budget_items: list[ClusterObject] = []
    storage: list[ClusterObject] = []
    workloads = WorkloadSelectors()
    dra = DraObjects()
    for path in paths:
        for item in read_objects(path):
            if item.kind in WORKLOAD_KINDS:
                workloads.add(item)
            elif item.kind in STORAGE_KINDS:
                storage.append(item)
            elif item.kind == "PriorityClass":
                classes.append(priority_class(item))
            elif item.kind == "PodDisruptionBudget":
                budget_items.append(item)
            elif item.kind == "HyperNode":
                hypernodes.append(_decoded_hypernode(item))
            elif gangs.reads(item):
                gangs.add(item)
            elif item.kind == "Node":
                node = node_from_object(item)
                if node.name in nodes:
                    raise ClusterInputError(item.where, "metadata.name", f"node {node.name!r} given twice")
                nodes[node.name] = node
            elif item.kind == "Pod":
                _read_running(item, pod_names, running, notes, (bound, pending))
            elif item.kind in DRA_KINDS:
                dra.add(item)
            else:
                unused.append(item.kind)
    catalog = catalog_of(storage, _claims_in_use(bound))
    snapshot = Snapshot(
        nodes=_with_volumes(_assembled(nodes, running, snapshot_nodes, notes), storage, bound, catalog),
        hypernodes=tuple(hypernodes),
        namespaces=workloads.namespace_list(),
    )
    priorities, names = Priorities(classes), {n.name for n in snapshot.nodes}
    preemptible = _preemptible(bound, priorities, names)
    return ClusterRead(
        snapshot=snapshot,
        notes=tuple(_unused_note(unused) + notes),
        gangs=gangs,
        running=preemptible,
        nominated=_preemptible(
            [(item, msgspec.structs.replace(pod, node=nomination(item))) for item, pod in pending], priorities, names
        ),  # fmt: skip
        budgets=tuple(budget(item, preemptible) for item in budget_items),
        priority_classes=tuple(classes),
        volumes=catalog,
        workloads=workloads,
        dra=dra,
    )


def _with_volumes(
    nodes: tuple[NodeState, ...],
    storage: list[ClusterObject],
    bound: list[tuple[ClusterObject, RunningPod]],
    catalog: VolumeCatalog,
) -> tuple[NodeState, ...]:
    """The nodes with their CSINode's attach limits and the CSI volumes their running pods use."""
    limits = csi_limits(storage)
    attached = attached_volumes(((item, pod.node) for item, pod in bound), catalog)
    if not limits and not attached:
        return nodes
    return tuple(
        msgspec.structs.replace(
            n,
            csi_volume_limits=limits.get(n.name, n.csi_volume_limits),
            csi_volumes=attached.get(n.name, n.csi_volumes),
        )
        for n in nodes
    )


def _claims_in_use(bound: list[tuple[ClusterObject, RunningPod]]) -> set[str]:
    """namespace/name of every claim a running pod mounts (ReadWriteOncePod holds it)."""
    in_use: set[str] = set()
    for item, _ in bound:
        namespace = item.body.get("metadata", {}).get("namespace") or "default"
        in_use.update(f"{namespace}/{name}" for name in pod_claim_names(item))
    return in_use


def _preemptible(
    bound: list[tuple[ClusterObject, RunningPod]], priorities: Priorities, nodes: set[str]
) -> tuple[PreemptiblePod, ...]:
    """The running pods on known nodes as preemption weighs them; each holds its devices under the id
    its node's allocations give it (nodes.py: its uid when annotated, else its name)."""
    return tuple(
        running_for_preemption(
            item,
            priorities,
            pod.node,
            pod.allocations[0].pod_uid if pod.allocations else pod.name,
            {k: format_quantity(v) for k, v in pod.requests.items()},
            pod.host_ports,
        )
        for item, pod in bound
        if pod.node in nodes
    )


def _decoded_hypernode(item: ClusterObject) -> HyperNode:
    try:
        return decode_hypernodes([item.body])[0]
    except ValueError as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


def _read_running(
    item: ClusterObject,
    pod_names: set[str],
    running: dict[str, list[RunningPod]],
    notes: list[str],
    found_pods: tuple[list[tuple[ClusterObject, RunningPod]], list[tuple[ClusterObject, RunningPod]]],
) -> None:
    pod = decode_pod(item)
    meta = pod.metadata
    name = f"{meta.namespace or 'default'}/{meta.name}"
    if name in pod_names:
        raise ClusterInputError(item.where, "metadata.name", f"pod {name!r} given twice")
    pod_names.add(name)
    bound, pending = found_pods
    if translate.is_finished(pod):
        return
    if not pod.spec.node_name:
        if nomination(item):  # pending, nominated to a node by a preemption: its room is held there
            pending.append((item, running_pod(item, pod, notes)))
        return
    found = running_pod(item, pod, notes)
    running.setdefault(pod.spec.node_name, []).append(found)
    bound.append((item, found))


def _assembled(
    nodes: dict[str, NodeState],
    running: dict[str, list[RunningPod]],
    snapshot_nodes: Sequence[NodeState],
    notes: list[str],
) -> tuple[NodeState, ...]:
    from_snapshot = {n.name: n for n in snapshot_nodes}
    out: list[NodeState] = []
    for name in sorted(nodes):
        node, counted = merged(nodes[name], from_snapshot.get(name))
        out.append(with_pods(node, running.get(name, ()), counted))
    # The snapshot's own nodes that no Node object names, as the snapshot says (its pods included).
    out.extend(n for n in snapshot_nodes if n.name not in nodes)
    for name in sorted(set(running) - {n.name for n in out}):
        notes.append(f"{len(running[name])} running pod(s) on node {name!r}, which no Node object names: ignored")
    return tuple(sorted(out, key=lambda n: n.name))


def read_pods(
    paths: Sequence[str], volumes: VolumeCatalog | None = None, workloads: WorkloadSelectors | None = None
) -> list[PodRequest]:
    """The pods to place: every Pod object of the files, its claims resolved against `volumes`
    (`workloads`: the cluster's Services and controllers, for their default spread selector).
    Raises ClusterInputError."""
    pods: list[PodRequest] = []
    for path in paths:
        for item in read_objects(path):
            if item.kind != "Pod":
                raise ClusterInputError(item.where, "kind", f"expected Pod objects to place, got {item.kind}")
            pod = pod_to_place(item, workloads)
            claims = pod_claim_names(item)
            if claims:
                rules = resolve_volumes(pod.namespace, claims, volumes or VolumeCatalog())
                pod = msgspec.structs.replace(pod, volumes=rules)
            pods.append(pod)
    if not pods:
        raise ClusterInputError(", ".join(paths), "", "no Pod to place")
    return pods
