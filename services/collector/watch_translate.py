"""Kubernetes objects -> topoplace events: pure functions, no I/O, no clock.

A problem with one field (a bad quantity, an undecodable device annotation)
never drops the whole object: the event goes out without that part and the
problem is returned for the caller to log and count.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import msgspec

from schemas import annotations as pod_annotations
from schemas import quantity as schema_quantity
from schemas.events import (
    DeviceAssignment,
    GangRef,
    HyperNodeEvent,
    HyperNodeMember,
    LifecyclePhase,
    MemberKind,
    NodeStatusEvent,
    PendingPodEvent,
    PodLifecycleEvent,
)
from services.collector.watch_objects import Container, HyperNode, Node, Pod, Quantity

# Gang membership, as Volcano / the coscheduling plugin mark it on pods.
GANG_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
GANG_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io"
GANG_MIN_MEMBER_KEYS = ("scheduling.k8s.io/min-member", "pod-group.scheduling.sigs.k8s.io/min-available")
QOS_ANNOTATION = "metax-tech.com/sgpu-qos-policy"  # the MetaX sharing pool a pod's devices run in
APP_CLASS_ANNOTATION = "metax-tech.com/sgpu-app-class"  # MetaX online/offline class

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})  # a finished pod holds no devices


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """Something wrong in one field of one object: logged and counted, never fatal."""

    object: str  # "<namespace>/<name>" or the node / hypernode name
    field: str
    reason: str


# --- quantities -------------------------------------------------------------------------------

def parse_quantity(value: Quantity) -> Decimal:
    """A Kubernetes quantity ("2", "100m", "16Gi", "1e3") as a number; ValueError names the value."""
    return schema_quantity.parse_quantity(str(value))


def format_quantity(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(value.normalize(), "f")


def _container_requests(container: Container) -> dict[str, Quantity]:
    # Kubernetes defaults a missing request to its limit (extended resources only have limits)
    return {**container.resources.limits, **container.resources.requests}


def pod_requests(pod: Pod) -> tuple[dict[str, str], list[Problem]]:
    """The pod's effective requests: summed over containers, at least the largest init container.

    A resource given once keeps its spelling; a sum is written back as a plain
    or milli quantity. A quantity that does not parse is passed on unchanged
    (the placer rejects it with the reason) and reported as a problem.
    """
    who = f"{pod.metadata.namespace}/{pod.metadata.name}"
    problems: list[Problem] = []
    raw: dict[str, list[Quantity]] = {}
    for container in pod.spec.containers:
        for name, qty in _container_requests(container).items():
            raw.setdefault(name, []).append(qty)
    init_max: dict[str, Decimal] = {}
    for container in pod.spec.init_containers:
        for name, qty in _container_requests(container).items():
            try:
                init_max[name] = max(init_max.get(name, Decimal(0)), parse_quantity(qty))
            except ValueError as exc:
                problems.append(
                    Problem(
                        object=who, field=f"spec.initContainers[{container.name}].resources.{name}", reason=str(exc)
                    )
                )
    result: dict[str, str] = {}
    for name, quantities in raw.items():
        try:
            total = sum((parse_quantity(q) for q in quantities), Decimal(0))
        except ValueError as exc:
            problems.append(Problem(object=who, field=f"spec.containers[*].resources.{name}", reason=str(exc)))
            result[name] = str(quantities[0])
            continue
        if name in init_max and init_max[name] > total:
            result[name] = format_quantity(init_max[name])
        elif len(quantities) == 1:
            result[name] = str(quantities[0])
        else:
            result[name] = format_quantity(total)
    for name, value in init_max.items():
        result.setdefault(name, format_quantity(value))
    return result, problems


# --- pods -------------------------------------------------------------------------------------


def parse_timestamp(text: str | None) -> float:
    """RFC 3339 as the API writes it -> unix seconds (0.0 when absent or unreadable)."""
    if not text:
        return 0.0
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def owner_of(pod: Pod) -> str:
    refs = pod.metadata.owner_references
    if not refs:
        return ""
    ref = next((r for r in refs if r.controller), refs[0])
    return f"{ref.kind}/{ref.name}"


def gang_of(pod: Pod) -> tuple[GangRef | None, list[Problem]]:
    meta = pod.metadata
    group = meta.annotations.get(GANG_NAME_ANNOTATION) or meta.labels.get(GANG_NAME_LABEL)
    if not group:
        return None, []
    min_member, problems = 1, []
    for key in GANG_MIN_MEMBER_KEYS:
        text = meta.annotations.get(key) or meta.labels.get(key)
        if text is None:
            continue
        try:
            min_member = int(text)
            if min_member < 1:
                raise ValueError
        except ValueError:
            min_member = 1
            problems.append(
                Problem(
                    object=f"{meta.namespace}/{meta.name}",
                    field=key,
                    reason=f"{text!r} is not a positive integer; using 1",
                )
            )
        break
    return GangRef(name=f"{meta.namespace}/{group}", min_member=min_member), problems


def is_ours(pod: Pod, scheduler_name: str) -> bool:
    return pod.spec.scheduler_name == scheduler_name


def is_pending(pod: Pod) -> bool:
    return not pod.spec.node_name and pod.status.phase not in TERMINAL_PHASES


def is_finished(pod: Pod) -> bool:
    return pod.status.phase in TERMINAL_PHASES


def pending_event(pod: Pod, observed_at: float) -> tuple[PendingPodEvent, list[Problem]]:
    requests, problems = pod_requests(pod)
    gang, gang_problems = gang_of(pod)
    meta = pod.metadata
    event = PendingPodEvent(
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        resource_version=meta.resource_version,
        requests=requests,
        annotations=dict(meta.annotations),
        labels=dict(meta.labels),
        owner=owner_of(pod),
        gang=gang,
        priority=pod.spec.priority or 0,
        created_at=parse_timestamp(meta.creation_timestamp),
        observed_at=observed_at,
    )
    return event, problems + gang_problems


def assigned_devices(pod: Pod) -> tuple[tuple[DeviceAssignment, ...], list[Problem]]:
    """The devices the pod's annotation gives it on the node it is bound to."""
    meta = pod.metadata
    who = f"{meta.namespace}/{meta.name}"
    text = meta.annotations.get(pod_annotations.DEVICES)
    if text is None:
        return (), []
    try:
        devices = pod_annotations.decode_devices(text)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        return (), [Problem(object=who, field=f"metadata.annotations[{pod_annotations.DEVICES}]", reason=str(exc))]
    annotated_node = meta.annotations.get(pod_annotations.NODE)
    if annotated_node and annotated_node != pod.spec.node_name:
        reason = f"the devices are for node {annotated_node!r} but the pod is bound to {pod.spec.node_name!r}"
        return (), [Problem(object=who, field=f"metadata.annotations[{pod_annotations.NODE}]", reason=reason)]
    return devices, []


def bound_event(pod: Pod, observed_at: float) -> tuple[PodLifecycleEvent, list[Problem]]:
    devices, problems = assigned_devices(pod)
    meta = pod.metadata
    event = PodLifecycleEvent(
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        phase=LifecyclePhase.BOUND,
        node=pod.spec.node_name or "",
        devices=devices,
        qos=meta.annotations.get(QOS_ANNOTATION, "") if devices else "",
        app_class=meta.annotations.get(APP_CLASS_ANNOTATION, "") if devices else "",
        observed_at=observed_at,
    )
    return event, problems


def deleted_event(uid: str, namespace: str, name: str, node: str, observed_at: float) -> PodLifecycleEvent:
    return PodLifecycleEvent(
        uid=uid, namespace=namespace, name=name, phase=LifecyclePhase.DELETED, node=node, observed_at=observed_at
    )


# --- nodes ------------------------------------------------------------------------------------


def node_status_event(node: Node, observed_at: float) -> NodeStatusEvent:
    ready = next((c.status == "True" for c in node.status.conditions if c.type == "Ready"), False)
    return NodeStatusEvent(
        node=node.metadata.name,
        labels=dict(node.metadata.labels),
        annotations=dict(node.metadata.annotations),
        allocatable={k: str(v) for k, v in node.status.allocatable.items()},
        ready=ready,
        unschedulable=node.spec.unschedulable,
        resource_version=node.metadata.resource_version,
        observed_at=observed_at,
    )


def node_deleted_event(name: str, observed_at: float) -> NodeStatusEvent:
    return NodeStatusEvent(node=name, ready=False, deleted=True, observed_at=observed_at)


# --- hypernodes -------------------------------------------------------------------------------

_MEMBER_KINDS = {"Node": MemberKind.NODE, "HyperNode": MemberKind.HYPERNODE}


def hypernode_event(hypernode: HyperNode, observed_at: float) -> tuple[HyperNodeEvent, list[Problem]]:
    """Members named by exactMatch; regex and label selectors are reported, not resolved."""
    name = hypernode.metadata.name
    members: list[HyperNodeMember] = []
    problems: list[Problem] = []
    for i, member in enumerate(hypernode.spec.members):
        kind = _MEMBER_KINDS.get(member.type)
        if kind is None:
            problems.append(
                Problem(
                    object=name, field=f"spec.members[{i}].type", reason=f"{member.type!r} is not Node or HyperNode"
                )
            )
            continue
        exact = member.selector.exact_match
        if exact is None or not exact.name:
            problems.append(
                Problem(
                    object=name, field=f"spec.members[{i}].selector", reason="only exactMatch selectors are supported"
                )
            )
            continue
        members.append(HyperNodeMember(kind=kind, name=exact.name))
    event = HyperNodeEvent(name=name, tier=hypernode.spec.tier, members=tuple(members), observed_at=observed_at)
    return event, problems


def hypernode_deleted_event(name: str, tier: int, observed_at: float) -> HyperNodeEvent:
    return HyperNodeEvent(name=name, tier=tier, members=(), deleted=True, observed_at=observed_at)
