"""Builders for the placer's tests: events with small defaults, and a tiny engine.

The stub engine places whole devices, first fit by node name then device
index, so tests can state the expected placement from that rule alone.
"""

from __future__ import annotations

from engine import Decision, Mode, PodRequest, Snapshot
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    DeviceUsage,
    DeviceUsageEvent,
    LifecyclePhase,
    NodeStatusEvent,
    NodeTopologyEvent,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from schemas.topology import Device, Vendor

GPU = "nvidia.com/gpu"


def topology(node: str, devices: int = 4, *, memory_mib: int = 16000) -> NodeTopologyEvent:
    return NodeTopologyEvent(
        node=node,
        machine_type="test-box",
        devices=tuple(
            Device(
                index=i,
                uuid=f"GPU-{node}-{i}",
                vendor=Vendor.NVIDIA,
                model="T",
                memory_mib=memory_mib,
            )
            for i in range(devices)
        ),
    )


def status(node: str, **fields: object) -> NodeStatusEvent:
    return NodeStatusEvent(node=node, **fields)  # type: ignore[arg-type]


def usage(node: str, unhealthy: tuple[int, ...] = (), devices: int = 4) -> DeviceUsageEvent:
    return DeviceUsageEvent(
        node=node,
        devices=tuple(DeviceUsage(index=i, healthy=i not in unhealthy) for i in range(devices)),
    )


def pending(uid: str, gpus: int = 1, *, rv: str = "1", priority: int = 0, **requests: str) -> PendingPodEvent:
    reqs = {GPU: str(gpus), **requests}
    return PendingPodEvent(
        uid=uid,
        namespace="default",
        name=f"pod-{uid}",
        resource_version=rv,
        requests=reqs,
        priority=priority,
    )


def shares(*indices: int) -> tuple[DeviceAssignment, ...]:
    return tuple(DeviceAssignment(index=i) for i in indices)


def placed(uid: str, node: str, indices: tuple[int, ...], *, decision_id: str | None = None) -> PlacementEvent:
    return PlacementEvent(
        decision_id=decision_id or f"d-{uid}-{node}",
        uid=uid,
        namespace="default",
        name=f"pod-{uid}",
        pod_resource_version="1",
        outcome=PlacementOutcome.PLACED,
        node=node,
        devices=shares(*indices),
    )


def binding(placement: PlacementEvent, outcome: BindingOutcome, reason: str = "") -> BindingEvent:
    return BindingEvent(
        decision_id=placement.decision_id,
        uid=placement.uid,
        namespace=placement.namespace,
        name=placement.name,
        outcome=outcome,
        node=placement.node,
        devices=placement.devices,
        reason=reason,
    )


def lifecycle(uid: str, phase: LifecyclePhase, node: str = "", indices: tuple[int, ...] = ()) -> PodLifecycleEvent:
    return PodLifecycleEvent(
        uid=uid,
        namespace="default",
        name=f"pod-{uid}",
        phase=phase,
        node=node,
        devices=shares(*indices),
    )


def held_devices(snapshot: Snapshot) -> dict[str, list[tuple[str, int]]]:
    """node -> sorted (pod uid, device index) pairs of every allocation."""
    return {n.name: sorted((a.pod_uid, a.index) for a in n.allocations) for n in snapshot.nodes}


def first_fit(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT) -> Decision:
    """Whole devices, the first schedulable node by name, its lowest free healthy indices."""
    want = int(request.requests.get(GPU, "0"))
    considered = 0
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        if not node.ready or node.unschedulable:
            continue
        considered += 1
        taken = {a.index for a in node.allocations}
        free = [d.index for d in sorted(node.devices, key=lambda d: d.index) if d.healthy and d.index not in taken]
        if len(free) >= want:
            chosen = tuple(DeviceAssignment(index=i, uuid=f"GPU-{node.name}-{i}") for i in free[:want])
            return Decision(
                node=node.name,
                devices=chosen,
                score=float(len(free) - want),
                score_parts={"left": float(len(free) - want)},
                candidates_considered=considered,
            )
    return Decision(
        node=None,
        reason=f"no node has {want} free devices",
        candidates_considered=considered,
    )


class FakeClock:
    """A monotonic clock that moves only when told (the parked pods' backoff reads it)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
