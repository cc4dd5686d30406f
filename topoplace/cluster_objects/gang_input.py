"""Several pods to place as one gang: which framework's gang they join, and the topology tree it names.

The pods must all join one gang, in this order: a `scheduling.k8s.io` PodGroup or v1alpha1 Workload
pod group (spec.schedulingGroup / spec.workloadRef), a KAI PodGroup (annotation `pod-group-name`
naming one of the cluster), a Volcano PodGroup (`scheduling.k8s.io/group-name`), or Kueue's
pod-group annotations. Each framework's object is kept as written; the engine translates it
(engine/decide/gang/input.py).

The tree, when no HyperNode is given (they come first): the Topology (Kueue's or KAI's) the gang
names (KAI: `topologyConstraint.topology` or `kai.scheduler/topology`; Kueue: the `topologyName` of
the ResourceFlavor whose `nodeLabels` the pods' nodeSelector holds, as Kueue pins admitted pods to
their flavor; with a Topology per flavor, each gang gets its own tree), else the one whose levels
hold every level the gang names (the first by name when several do), else, for levels that no
Topology holds, one level per node label the gang names, as KEP-5732 groups nodes by the label
itself (with several such labels their order is not known: the first Topology's levels are kept).
`kubernetes.io/hostname` needs no level: the gang search reads it as one node.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine import PodRequest, Snapshot
from engine.core.model import GangInput
from engine.decide.gang.input import gang_request
from engine.decide.gang.tiers import HOSTNAME
from schemas.errors import FieldError
from schemas.gangs import KUEUE_GROUP, VOLCANO_GROUP_ANNOTATION
from schemas.gangs_kai import KAI_GROUP_ANNOTATION, KAI_TOPOLOGY, KaiPodGroup, constraint_of
from schemas.gangs_kube import KubePodGroup, from_template, resolved
from topoplace.cluster_objects.files import read_objects
from topoplace.cluster_objects.gangs import KAI_TOPOLOGY_API, KUEUE_GROUP_API, GangObjects, KubeLink, kube_link


def _kube_links(paths: Sequence[str]) -> list[KubeLink | None]:
    return [kube_link(item) for path in paths for item in read_objects(path) if item.kind == "Pod"]


def _one(values: Sequence[object]) -> bool:
    return len(set(map(repr, values))) == 1 and values[0] is not None


def gang_of(pods: list[PodRequest], pod_paths: Sequence[str], gangs: GangObjects) -> GangInput:
    """Several pods as one gang (module docstring); ValueError when they are not one, or when its
    PodGroup cannot be read (naming the PodGroup and the field)."""
    gang = _gang_of(pods, pod_paths, gangs)
    group = gang.workload_group or gang.kai_podgroup or gang.podgroup
    if group is not None:
        try:
            gang_request(gang)
        except FieldError as exc:
            kind = "scheduling.k8s.io" if gang.workload_group else "KAI" if gang.kai_podgroup else "Volcano"
            where = f"{group.metadata.namespace}/{group.metadata.name}"
            raise ValueError(f"--cluster: {kind} PodGroup {where!r}: {exc}") from None
    return gang


def _gang_of(pods: list[PodRequest], pod_paths: Sequence[str], gangs: GangObjects) -> GangInput:
    namespace = pods[0].namespace
    links = _kube_links(pod_paths)
    if any(link is not None for link in links):
        if not _one(links) or len(links) != len(pods):
            raise ValueError("--pods: the pods name different scheduling.k8s.io pod groups; place one gang at a time")
        link = links[0]
        assert link is not None
        return GangInput(workload_group=_kube_group(link, namespace, gangs), pods=tuple(pods))
    kai = [p.annotations.get(KAI_GROUP_ANNOTATION) for p in pods]
    if _one(kai) and f"{namespace}/{kai[0]}" in gangs.kai:
        return GangInput(kai_podgroup=gangs.kai[f"{namespace}/{kai[0]}"], pods=tuple(pods))
    volcano = [p.annotations.get(VOLCANO_GROUP_ANNOTATION) for p in pods]
    if _one(volcano):
        name = f"{namespace}/{volcano[0]}"
        group = gangs.volcano.get(name)
        if group is None:
            raise ValueError(f"--pods: the pods name PodGroup {name!r}, which no --cluster file holds")
        return GangInput(podgroup=group, pods=tuple(pods))
    if _one([p.annotations.get(KUEUE_GROUP) for p in pods]):
        return GangInput(pods=tuple(pods), kueue_feature_gates=dict(gangs.kueue_feature_gates or {}))
    if _one(kai):
        raise ValueError(f"--pods: the pods name KAI PodGroup '{namespace}/{kai[0]}', which no --cluster file holds")
    raise ValueError(
        f"--pods: {len(pods)} pods that are not one gang (one scheduling.k8s.io pod group,"
        f" {KAI_GROUP_ANNOTATION}, {VOLCANO_GROUP_ANNOTATION} or {KUEUE_GROUP} for all); place one Pod at a time"
    )


def _kube_group(link: KubeLink, namespace: str, gangs: GangObjects) -> KubePodGroup:
    if link.pod_group:
        group = gangs.kube.get(f"{namespace}/{link.pod_group}")
        if group is None:
            raise ValueError(
                f"--pods: the pods name PodGroup '{namespace}/{link.pod_group}' (scheduling.k8s.io),"
                " which no --cluster file holds"
            )
        ref = group.spec.pod_group_template_ref
        workload = None
        if ref is not None and ref.workload is not None:
            workload = gangs.workloads.get(f"{namespace}/{ref.workload.workload_name}")
        return resolved(group, workload)
    workload = gangs.workloads.get(f"{namespace}/{link.workload}")
    if workload is None:
        raise ValueError(f"--pods: the pods name Workload '{namespace}/{link.workload}', which no --cluster file holds")
    template = workload.template(link.workload_group)
    if template is None:
        raise ValueError(f"--pods: Workload '{namespace}/{link.workload}' has no pod group {link.workload_group!r}")
    return from_template(workload, template, link.replica_key)


def with_gang_tree(snapshot: Snapshot, gang: GangInput, gangs: GangObjects) -> Snapshot:
    """The snapshot with the label levels of the gang's Topology (module docstring); as it is with HyperNodes."""
    if snapshot.hypernodes:
        return snapshot
    named = (KAI_TOPOLOGY_API, _named_topology(gang))
    if not named[1]:
        named = (KUEUE_GROUP_API, _flavor_topology(gang, gangs))
    if named[1]:
        if named not in gangs.topologies:
            raise ValueError(
                f"--pods: the gang names Topology {named[1]!r} ({named[0]}), which no --cluster file holds"
            )
        return msgspec.structs.replace(snapshot, topology_levels=gangs.topologies[named])
    request = gang_request(gang)
    wanted = {c.highest_tier_name for c in (request.network, *(p.network for p in request.sub_groups)) if c}
    wanted -= {"", HOSTNAME}  # a node is its own domain: no level needed (nor its label)
    for name in sorted(gangs.topologies):
        if wanted <= set(gangs.topologies[name]):
            return msgspec.structs.replace(snapshot, topology_levels=gangs.topologies[name])
    if len(wanted) == 1:
        return msgspec.structs.replace(snapshot, topology_levels=(wanted.pop(),))
    first = min(gangs.topologies, default=None)
    return snapshot if first is None else msgspec.structs.replace(snapshot, topology_levels=gangs.topologies[first])


def _flavor_topology(gang: GangInput, gangs: GangObjects) -> str:
    """The Topology of the first ResourceFlavor (by name) whose node labels the first pod's nodeSelector holds."""
    if not gang.pods:
        return ""
    selector = gang.pods[0].node_selector
    for flavor in gangs.flavors:
        if flavor.node_labels and all(selector.get(k) == v for k, v in flavor.node_labels.items()):
            return flavor.topology
    return ""


def _named_topology(gang: GangInput) -> str:
    group: KaiPodGroup | None = gang.kai_podgroup
    if group is None:
        return gang.pods[0].annotations.get(KAI_TOPOLOGY, "") if gang.pods else ""
    found = constraint_of(group, gang.pods[0].annotations)
    names = [found.topology if found is not None else ""]
    names += [s.topology_constraint.topology for s in group.spec.sub_groups if s.topology_constraint is not None]
    return next((n for n in names if n), "")
