"""One node as the engine sees it, built from the view's events about it and the pods on it."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

import msgspec

from engine import Allocation, NodeState
from engine.core.model import PlacedPod
from schemas.events import DeviceUsageEvent, NodeStatusEvent, NodeTopologyEvent
from schemas.kube import HostPort
from schemas.quantity import QuantityError, parse_quantity
from schemas.volumes import CsiVolume
from services.placer.holdings import PodFacts


def node_state(
    topology: NodeTopologyEvent,
    status: NodeStatusEvent | None,
    unhealthy: set[int],
    pods: Iterable[PodFacts],
    *,
    csi: tuple[dict[str, int], tuple[CsiVolume, ...]] = ({}, ()),
) -> NodeState:
    """`pods`: the facts of every pod holding devices or resources on the node, in a stable order; `csi`:
    its CSINode's attach limit per driver and the CSI volumes its pods use (NodeVolumeLimits)."""
    name = topology.node
    devices = topology.devices
    if unhealthy:
        devices = tuple(
            msgspec.structs.replace(d, healthy=False) if d.index in unhealthy else d for d in topology.devices
        )
    allocations: list[Allocation] = []
    requested: dict[str, Decimal] = {}
    count = 0
    running: list[PlacedPod] = []
    ports: list[HostPort] = []
    for facts in pods:
        for holding in facts.holdings():
            if holding.node != name:
                continue
            allocations.extend(
                Allocation(
                    pod_uid=holding.pod_uid,
                    index=device.index,
                    memory_mib=device.memory_mib,
                    cores=device.cores,
                    qos=holding.qos,
                    app_class=holding.app_class,
                )
                for device in holding.devices
            )
        placed = facts.placed_on()
        if placed is not None and placed[0] == name:
            running.append(placed[1])
        taking = facts.ports_on()
        if taking is not None and taking[0] == name:
            ports.extend(taking[1])
        where = facts.requests_on()
        if where is not None and where[0] == name:
            count += 1
            _add_requests(requested, where[1])
    allocatable = dict(status.allocatable) if status is not None and status.allocatable else None
    return NodeState(
        name=name,
        machine_type=topology.machine_type,
        devices=devices,
        links=topology.links,
        labels=dict(status.labels) if status is not None else {},
        annotations=dict(status.annotations) if status is not None else {},
        taints=status.taints if status is not None else (),
        # Without its status we know neither cordon nor readiness: not a candidate.
        ready=status is not None and status.ready and not status.deleted,
        unschedulable=status is not None and status.unschedulable,
        allocatable=allocatable,
        requested={k: _quantity_text(v) for k, v in sorted(requested.items())},
        pods=count,
        host_ports=tuple(ports),
        allocations=tuple(allocations),
        running=tuple(running),
        images=status.images if status is not None else (),  # ImageLocality
        csi_volume_limits=csi[0],
        csi_volumes=csi[1],
    )


def unhealthy_devices(topology: NodeTopologyEvent | None, usage: DeviceUsageEvent | None) -> set[int]:
    """Device indices the latest usage report calls unhealthy (usage overrides topology)."""
    unhealthy = {d.index for d in topology.devices if not d.healthy} if topology else set()
    if usage is not None:
        for device in usage.devices:
            if device.healthy:
                unhealthy.discard(device.index)
            else:
                unhealthy.add(device.index)
    return unhealthy


def status_problem(status: NodeStatusEvent) -> str | None:
    """Why a node with this status cannot take pods, in words; None when it can."""
    if status.deleted:
        return "the node was deleted"
    if not status.ready:
        return "the node is not ready"
    if status.unschedulable:
        return "the node is cordoned"
    return None


def _add_requests(into: dict[str, Decimal], requests: dict[str, str]) -> None:
    for resource, text in requests.items():
        try:
            into[resource] = into.get(resource, Decimal(0)) + parse_quantity(text)
        except QuantityError:
            continue  # the pod's own decision reported it; a node's sum skips what cannot be read


def _quantity_text(value: Decimal) -> str:
    return format(value.normalize(), "f") if value != value.to_integral_value() else str(int(value))
