"""Pod objects -> what the engine reads: a pod to place (PodRequest), or what a running pod holds.

The pod's effective requests, node affinity, tolerations and host ports are read by
the cluster watcher's own translation (services/collector/cluster/translate.py and
host_ports.py, pure functions), so both paths read a Pod alike. A field the API server would refuse is bad
input: the command names the file and the field, and stops.

Devices a running pod holds: the live services believe only the binder's seal
(schemas/seal.py), whose key an offline command does not have. Here the
pod's `topoplace.io/devices` annotation is taken as written, and each pod
read that way is named in a note: the answer is advice, nothing is bound, and
a what-if over a cluster is only useful with the devices its pods hold. A pod
without that annotation counts by its requests (NodeResourcesFit), holding no
particular device of a node whose topology the snapshot gives, and the lowest
free device indices of a node whose devices are only a count.
"""

from __future__ import annotations

from decimal import Decimal

import msgspec

from engine import Allocation, PodRequest
from engine.core.model import PlacedPod
from schemas import annotations as pod_annotations
from schemas.kube import HostPort
from schemas.quantity import QuantityError, parse_quantity
from services.collector.cluster import objects as obj
from services.collector.cluster import translate
from services.collector.cluster.host_ports import host_ports as pod_host_ports
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject
from topoplace.cluster_objects.workloads import WorkloadSelectors, placed_pod, pod_topology


class RunningPod(msgspec.Struct, frozen=True, kw_only=True):
    """What a pod bound to a node takes there."""

    name: str  # namespace/name
    node: str
    requests: dict[str, Decimal]
    host_ports: tuple[HostPort, ...]
    allocations: tuple[Allocation, ...]  # from topoplace.io/devices; () when it names none
    device_count: dict[str, int]  # whole devices it requests by resource, for nodes known only by counts
    placed: PlacedPod  # its labels and pod (anti-)affinity (InterPodAffinity, PodTopologySpread)


def decode_pod(item: ClusterObject) -> obj.Pod:
    try:
        return msgspec.convert(item.body, obj.Pod)
    except msgspec.ValidationError as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


def _problem(item: ClusterObject, problems: list[translate.Problem]) -> None:
    if problems:
        first = problems[0]
        raise ClusterInputError(item.where, first.field, first.reason)


def host_ports(item: ClusterObject) -> tuple[HostPort, ...]:
    """Containers' and sidecars' ports with hostPort > 0 (kube's GetHostPorts), read as the cluster watcher
    reads them; a port the API server would refuse is bad input."""
    ports, problems = pod_host_ports(decode_pod(item))
    if problems:
        field, reason = problems[0]
        raise ClusterInputError(item.where, field, reason)
    return ports


def pod_to_place(item: ClusterObject, workloads: WorkloadSelectors | None = None) -> PodRequest:
    """A Pod object as the engine's request (`workloads`: the cluster's, for its default spread selector).
    Raises ClusterInputError."""
    pod = decode_pod(item)
    affinities, constraints = pod_topology(item)
    requests, problems = translate.pod_requests(pod)
    _problem(item, problems)
    affinity, tolerations, problems = translate.node_constraints(pod)
    _problem(item, problems)
    meta = pod.metadata
    if not meta.name:
        raise ClusterInputError(item.where, "metadata.name", "a pod to place needs a name")
    namespace = meta.namespace or "default"
    return PodRequest(
        uid=meta.uid or f"{namespace}/{meta.name}",
        namespace=namespace,
        name=meta.name,
        requests=requests,
        annotations=dict(meta.annotations),
        labels=dict(meta.labels),
        node_selector=dict(pod.spec.node_selector),
        affinity=affinity,
        tolerations=tolerations,
        host_ports=host_ports(item),
        node_name=pod.spec.node_name or "",
        affinities=affinities,
        topology_spread_constraints=constraints,
        default_spread_selector=workloads.default_selector(pod) if workloads is not None else None,
        images=translate.container_images(pod),
    )


def running_pod(item: ClusterObject, pod: obj.Pod, notes: list[str]) -> RunningPod:
    """What a pod bound to its node takes there. Raises ClusterInputError."""
    requests, problems = translate.pod_requests(pod)
    _problem(item, problems)
    amounts: dict[str, Decimal] = {}
    for resource, text in requests.items():
        try:
            amounts[resource] = parse_quantity(text)
        except QuantityError as exc:  # pod_requests reports these; kept safe
            raise ClusterInputError(item.where, f"requests.{resource}", str(exc)) from None
    meta = pod.metadata
    name = f"{meta.namespace or 'default'}/{meta.name}"
    return RunningPod(
        name=name,
        node=pod.spec.node_name or "",
        requests=amounts,
        host_ports=host_ports(item),
        allocations=_allocations(item, pod, name, notes),
        device_count={r: int(a) for r, a in amounts.items() if a == a.to_integral_value() and a > 0},
        placed=placed_pod(item, pod),
    )


def _allocations(item: ClusterObject, pod: obj.Pod, name: str, notes: list[str]) -> tuple[Allocation, ...]:
    text = pod.metadata.annotations.get(pod_annotations.DEVICES)
    if text is None:
        return ()
    field = f"metadata.annotations[{pod_annotations.DEVICES}]"
    try:
        devices = pod_annotations.decode_devices(text)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ClusterInputError(item.where, field, str(exc)) from None
    notes.append(f"{name}: devices taken from {pod_annotations.DEVICES} as written (no key to verify its seal here)")
    uid = pod.metadata.uid or name
    qos = pod.metadata.annotations.get(translate.QOS_ANNOTATION, "")
    app_class = pod.metadata.annotations.get(translate.APP_CLASS_ANNOTATION, "")
    return tuple(
        Allocation(pod_uid=uid, index=d.index, memory_mib=d.memory_mib, cores=d.cores, qos=qos, app_class=app_class)
        for d in devices
    )
