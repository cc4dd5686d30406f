"""Node objects and the pods running on them -> the engine's nodes (NodeState).

What Kubernetes says of a node (labels, annotations, taints, cordon,
readiness, allocatable) comes from its Node object, read by the cluster
watcher's own translation, the images it holds (`status.images`, ImageLocality)
included. What runs there comes from the Pods bound to it
(`spec.nodeName`, not finished): their requests summed, their count, their
host ports, the devices they hold (pods.py says how they are known), their
labels and pod (anti-)affinity (`NodeState.running`).

The node's devices and links come from topoplace's own node snapshot where
one names the node (`--snapshot`, merged by name: its devices, links, machine
type and the device shares it records, to which the cluster's pods add
theirs). Otherwise they are what the Node's allocatable says: N whole devices
of a vendor's count resource, no links, a running pod's whole devices held on
the lowest free indices. A snapshot node that no Node object names is kept as
the snapshot says.

A Node without a Ready condition is taken as ready (kube-scheduler itself
reads only taints; the node controller taints a node that is not ready).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

import msgspec

from engine import Allocation, NodeState
from schemas.pod_requests import format_quantity
from schemas.topology import Device, Vendor
from schemas.vendors import DESCRIPTORS
from services.collector.cluster import objects as obj
from services.collector.cluster import translate
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject
from topoplace.cluster_objects.pods import RunningPod

# The whole-device count resources of each vendor (schemas/vendors.py): a node known only by its objects
# has this many devices. A vendor's names count the same devices (Neuron's `neurondevice` and the older
# `neuron`, both advertised by its device plugin): the first the Node advertises counts them.
COUNT_RESOURCES: Mapping[str, Vendor] = {name: d.vendor for d in DESCRIPTORS for name in d.whole_names}


# kube's scoring defaults for a pod that asks no cpu / memory (NodeResourcesFit's NonZeroRequested)
NONZERO_DEFAULTS: Mapping[str, Decimal] = {"cpu": Decimal("0.1"), "memory": Decimal(200 * 1024 * 1024)}


def node_from_object(item: ClusterObject) -> NodeState:
    """The node as its object says, without devices or pods. Raises ClusterInputError."""
    try:
        node = msgspec.convert(item.body, obj.Node)
    except msgspec.ValidationError as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None
    if not node.metadata.name:
        raise ClusterInputError(item.where, "metadata.name", "a node needs a name")
    event, problems = translate.node_status_event(node, 0.0)
    if problems:
        raise ClusterInputError(item.where, problems[0].field, problems[0].reason)
    has_ready = any(c.type == "Ready" for c in node.status.conditions)
    return NodeState(
        name=event.node,
        labels=dict(event.labels),
        annotations=dict(event.annotations),
        taints=event.taints,
        ready=event.ready or not has_ready,
        unschedulable=event.unschedulable,
        allocatable=dict(event.allocatable),
        images=event.images,
    )


def counted_devices(allocatable: Mapping[str, str], where: str) -> tuple[Device, ...]:
    """N whole devices per vendor count resource the node reports (indices follow one another)."""
    devices: list[Device] = []
    counted: set[Vendor] = set()
    for resource, vendor in COUNT_RESOURCES.items():
        text = allocatable.get(resource)
        if text is None or vendor in counted:
            continue
        counted.add(vendor)
        try:
            count = int(Decimal(text))
        except ArithmeticError:
            raise ClusterInputError(where, f"status.allocatable[{resource}]", f"not a count: {text!r}") from None
        start = len(devices)
        devices.extend(
            Device(index=start + i, uuid="", vendor=vendor, model="", memory_mib=0) for i in range(max(count, 0))
        )
    return tuple(devices)


def with_pods(node: NodeState, pods: Sequence[RunningPod], counted: bool) -> NodeState:
    """The node with what its running pods take (`counted`: its devices are only a count)."""
    requested: dict[str, Decimal] = {}
    nonzero = dict.fromkeys(NONZERO_DEFAULTS, Decimal(0))
    ports = list(node.host_ports)
    allocations = list(node.allocations)
    held_by = {a.pod_uid for a in allocations}
    for pod in pods:
        for resource, amount in pod.requests.items():
            requested[resource] = requested.get(resource, Decimal(0)) + amount
        for resource, default in NONZERO_DEFAULTS.items():
            nonzero[resource] += pod.requests.get(resource, default)
        ports.extend(pod.host_ports)
        if pod.allocations and pod.allocations[0].pod_uid not in held_by:
            allocations.extend(pod.allocations)
        elif not pod.allocations and counted:
            allocations.extend(_lowest_free(node.devices, allocations, pod))
    return msgspec.structs.replace(
        node,
        requested={k: format_quantity(v) for k, v in sorted(requested.items())},
        pods=len(pods),
        nonzero_requested={k: format_quantity(v) for k, v in nonzero.items()} if pods else {},
        host_ports=tuple(ports),
        allocations=tuple(allocations),
        running=tuple(pod.placed for pod in pods),
    )


def _lowest_free(devices: tuple[Device, ...], held: list[Allocation], pod: RunningPod) -> list[Allocation]:
    """A counted node's whole devices for a pod whose devices nobody wrote: the lowest free of its vendor."""
    taken = {a.index for a in held}
    out: list[Allocation] = []
    for resource, count in pod.device_count.items():
        vendor = COUNT_RESOURCES.get(resource)
        if vendor is None:
            continue
        free = [d.index for d in devices if d.vendor is vendor and d.index not in taken]
        for index in free[:count]:
            out.append(Allocation(pod_uid=pod.name, index=index))
            taken.add(index)
    return out


def merged(from_objects: NodeState, from_snapshot: NodeState | None) -> tuple[NodeState, bool]:
    """The node's Kubernetes facts with the snapshot's devices where it has the node; True: only counted."""
    if from_snapshot is None:
        where = f"node {from_objects.name!r}"
        devices = counted_devices(from_objects.allocatable or {}, where)
        return msgspec.structs.replace(from_objects, devices=devices), True
    node = msgspec.structs.replace(
        from_objects,
        machine_type=from_snapshot.machine_type,
        devices=from_snapshot.devices,
        links=from_snapshot.links,
        allocations=from_snapshot.allocations,
    )
    return node, False
