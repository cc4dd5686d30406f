"""A cluster given as Kubernetes objects -> the engine's Snapshot, and the pods to place.

Nodes and Pods are used now, and for a gang its Volcano PodGroup and the
HyperNodes; every other kind is accepted and left aside, named once in a note
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
from schemas.gangs import PodGroup
from services.collector.cluster import translate
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject, read_objects
from topoplace.cluster_objects.nodes import merged, node_from_object, with_pods
from topoplace.cluster_objects.pods import RunningPod, decode_pod, pod_to_place, running_pod


class ClusterRead(msgspec.Struct, frozen=True, kw_only=True):
    snapshot: Snapshot
    notes: tuple[str, ...]  # for stderr: kinds not used yet, devices read without their seal
    podgroups: dict[str, PodGroup] = {}  # Volcano PodGroups by namespace/name, for a gang


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
    podgroups: dict[str, PodGroup] = {}
    for path in paths:
        for item in read_objects(path):
            if item.kind == "HyperNode":
                hypernodes.append(_decoded_hypernode(item))
            elif item.kind == "PodGroup":
                group = _decoded(item, PodGroup)
                podgroups[f"{group.metadata.namespace or 'default'}/{group.metadata.name}"] = group
            elif item.kind == "Node":
                node = node_from_object(item)
                if node.name in nodes:
                    raise ClusterInputError(item.where, "metadata.name", f"node {node.name!r} given twice")
                nodes[node.name] = node
            elif item.kind == "Pod":
                _read_running(item, pod_names, running, notes)
            else:
                unused.append(item.kind)
    return ClusterRead(
        snapshot=Snapshot(nodes=_assembled(nodes, running, snapshot_nodes, notes), hypernodes=tuple(hypernodes)),
        notes=tuple(_unused_note(unused) + notes),
        podgroups=podgroups,
    )


def _decoded(item: ClusterObject, kind: type[PodGroup]) -> PodGroup:
    try:
        return msgspec.convert(item.body, kind)
    except ValueError as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


def _decoded_hypernode(item: ClusterObject) -> HyperNode:
    try:
        return decode_hypernodes([item.body])[0]
    except ValueError as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


def _read_running(
    item: ClusterObject, pod_names: set[str], running: dict[str, list[RunningPod]], notes: list[str]
) -> None:
    pod = decode_pod(item)
    meta = pod.metadata
    name = f"{meta.namespace or 'default'}/{meta.name}"
    if name in pod_names:
        raise ClusterInputError(item.where, "metadata.name", f"pod {name!r} given twice")
    pod_names.add(name)
    if not pod.spec.node_name or translate.is_finished(pod):
        return
    running.setdefault(pod.spec.node_name, []).append(running_pod(item, pod, notes))


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


def read_pods(paths: Sequence[str]) -> list[PodRequest]:
    """The pods to place: every Pod object of the files. Raises ClusterInputError."""
    pods: list[PodRequest] = []
    for path in paths:
        for item in read_objects(path):
            if item.kind != "Pod":
                raise ClusterInputError(item.where, "kind", f"expected Pod objects to place, got {item.kind}")
            pods.append(pod_to_place(item))
    if not pods:
        raise ClusterInputError(", ".join(paths), "", "no Pod to place")
    return pods
