"""Kubernetes objects -> topoplace events: pure functions, no I/O, no clock.

A problem with one field (a bad quantity, an undecodable device annotation,
a toleration the API server would have refused) never drops the whole
object: the event goes out without that part and the problem is returned
for the caller to log and count. Gangs are translated in gangs.py, HyperNodes and
Kueue Topologies in network.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, TypeVar

import msgspec

from engine.decide.kube.default_selector import WorkloadSelectors
from schemas import annotations as pod_annotations
from schemas import quantity as schema_quantity
from schemas.dra import PodClaim
from schemas.events import (
    DeviceAssignment,
    LabelSelector,
    LabelSelectorRequirement,
    LifecyclePhase,
    NodeImage,
    NodeStatusEvent,
    PendingPodEvent,
    PodLifecycleEvent,
)
from schemas.kube import Affinity, Taint, Toleration
from schemas.pod_requests import effective_request
from schemas.pod_requests import format_quantity as format_quantity
from schemas.seal import SEAL, DecisionKey
from services.collector.cluster import objects as obj
from services.collector.cluster import pending_fields, pod_priority, pod_topology
from services.collector.cluster.host_ports import SIDECAR_RESTART_POLICY, host_ports
from services.collector.cluster.objects import Container, Node, Pod, Quantity
from topoplace.kube_storage import pod_claim_names

QOS_ANNOTATION = "metax-tech.com/sgpu-qos-policy"  # the MetaX sharing pool a pod's devices run in
APP_CLASS_ANNOTATION = "metax-tech.com/sgpu-app-class"  # MetaX online/offline class

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})  # a finished pod holds no devices


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """Something wrong in one field of one object: logged and counted, never fatal."""

    object: str  # "<namespace>/<name>" or the node / hypernode name
    field: str
    reason: str


def who(meta: obj.ObjectMeta) -> str:
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


# --- quantities -------------------------------------------------------------------------------


def parse_quantity(value: Quantity) -> Decimal:
    """A Kubernetes quantity ("2", "100m", "16Gi", "1e3") as a number; ValueError names the value."""
    return schema_quantity.parse_quantity(str(value))


def _container_requests(container: Container) -> dict[str, Quantity]:
    # Kubernetes defaults a missing request to its limit (extended resources only have limits)
    return {**container.resources.limits, **container.resources.requests}


def pod_requests(pod: Pod) -> tuple[dict[str, str], list[Problem]]:
    """The pod's effective requests, as kube's PodRequests computes them (schemas.pod_requests).

    Containers add up; the largest init container's need (with the sidecars
    started before it) is the floor; sidecars add to the sum; the pod's overhead
    is added. A result equal to a quantity the pod wrote keeps that spelling
    (`16Gi`); any other is written as a plain or milli quantity. A quantity that
    does not parse is passed on unchanged for its resource (the placer rejects
    it with the reason) and reported as a problem.
    """
    spec = pod.spec
    where = who(pod.metadata)
    problems: list[Problem] = []
    bad: dict[str, str] = {}
    spellings: dict[str, list[tuple[Decimal, str]]] = {}

    def parsed(requests: Mapping[str, Quantity], field: str) -> dict[str, Decimal]:
        amounts: dict[str, Decimal] = {}
        for name, qty in requests.items():
            try:
                amounts[name] = amount = parse_quantity(qty)
                spellings.setdefault(name, []).append((amount, str(qty)))
            except ValueError as exc:
                problems.append(Problem(object=where, field=f"{field}.{name}", reason=str(exc)))
                bad.setdefault(name, str(qty))
        return amounts

    containers = [parsed(_container_requests(c), f"spec.containers[{c.name}].resources") for c in spec.containers]
    inits = [
        (parsed(_container_requests(c), f"spec.initContainers[{c.name}].resources"), _is_sidecar(c))
        for c in spec.init_containers
    ]
    overhead = parsed(spec.overhead, "spec.overhead")
    good = [{n: a for n, a in c.items() if n not in bad} for c in containers]
    good_inits = [({n: a for n, a in c.items() if n not in bad}, sidecar) for c, sidecar in inits]
    total = effective_request(good, good_inits, {n: a for n, a in overhead.items() if n not in bad})
    result = {name: _spelled(amount, spellings[name]) for name, amount in total.items()}
    return {**result, **bad}, problems


def _is_sidecar(container: Container) -> bool:
    return container.restart_policy == SIDECAR_RESTART_POLICY


def _spelled(amount: Decimal, spellings: list[tuple[Decimal, str]]) -> str:
    return next((text for value, text in spellings if value == amount), None) or format_quantity(amount)


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


def is_ours(pod: Pod, scheduler_name: str) -> bool:
    return pod.spec.scheduler_name == scheduler_name


def is_pending(pod: Pod) -> bool:
    return not pod.spec.node_name and pod.status.phase not in TERMINAL_PHASES


def is_gated(pod: Pod) -> bool:
    """Scheduling gates (Kueue's admission gate, for one) hold the pod back from every scheduler."""
    return bool(pod.spec.scheduling_gates)


def is_finished(pod: Pod) -> bool:
    return pod.status.phase in TERMINAL_PHASES


D = TypeVar("D")


def _decoded(value: Any, kind: type[D], where: str, field: str, problems: list[Problem]) -> D | None:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        problems.append(Problem(object=where, field=field, reason=str(exc)))
        return None


def node_constraints(pod: Pod) -> tuple[Affinity | None, tuple[Toleration, ...], list[Problem]]:
    """Node affinity and tolerations, each checked as the API server checks them; a bad one is left out."""
    where = who(pod.metadata)
    problems: list[Problem] = []
    affinity = None
    if pod.spec.affinity is not None:
        affinity = _decoded(pod.spec.affinity, Affinity, where, "spec.affinity", problems)
        if affinity is not None and affinity.node_affinity is None:
            affinity = None  # pod (anti-)affinity only: pod_topology.py reads it
    tolerations = [
        _decoded(t, Toleration, where, f"spec.tolerations[{i}]", problems) for i, t in enumerate(pod.spec.tolerations)
    ]
    return affinity, tuple(t for t in tolerations if t is not None), problems


def pending_event(
    pod: Pod, observed_at: float, *, gang_member: bool = False, selectors: WorkloadSelectors | None = None
) -> tuple[PendingPodEvent, list[Problem]]:
    """A pod of ours waiting for a node (a gang member gets its GangRef, and its bound, in gangs.py).

    Its labels, the annotations the placer reads (pending_fields.py), its pod affinity, spread constraints
    and DefaultSelector (pod_topology.py). Over its bound: reduced to who it is, with the reason."""
    requests, problems = pod_requests(pod)
    affinity, tolerations, constraint_problems = node_constraints(pod)
    ports, port_problems = host_ports(pod)
    meta = pod.metadata
    event = PendingPodEvent(
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        resource_version=meta.resource_version,
        requests=requests,
        annotations=pending_fields.pending_annotations(meta.annotations),
        labels=dict(meta.labels),
        owner=owner_of(pod),
        priority=pod.spec.priority or 0,
        created_at=parse_timestamp(meta.creation_timestamp),
        observed_at=observed_at,
        node_selector=dict(pod.spec.node_selector),
        affinity=affinity,
        tolerations=tolerations,
        host_ports=ports,
        claims=claim_refs(pod),
        containers=pending_fields.container_requests(pod),
        volume_claims=pod_claim_names(meta.name, pod.spec.volumes),
        images=container_images(pod),
    )
    event = pod_priority.pending(event, pod)
    event, topology_problems = pod_topology.with_pending_topology(event, pod, selectors)
    problems += constraint_problems
    problems += [Problem(object=who(meta), field=f, reason=r) for f, r in (*port_problems, *topology_problems)]
    if not gang_member:
        event, too_large = pending_fields.bounded(event)
        if too_large is not None:
            problems.append(Problem(object=who(meta), field="metadata", reason=too_large))
    return event, problems


def container_images(pod: Pod) -> tuple[str, ...]:
    """The images of the pod's init containers and containers, one per container (ImageLocality)."""
    return tuple(c.image for c in (*pod.spec.init_containers, *pod.spec.containers) if c.image)


def claim_refs(pod: Pod) -> tuple[PodClaim, ...]:
    """The pod's claims by name; a template's claim has an empty name until the controller made it."""
    made = {s.name: s.resource_claim_name or "" for s in pod.status.resource_claim_statuses}
    refs = []
    for entry in pod.spec.resource_claims:
        name = entry.resource_claim_name or (made.get(entry.name, "") if entry.resource_claim_template_name else "")
        template = entry.resource_claim_template_name or ""
        refs.append(PodClaim(pod_claim_name=entry.name, claim_name=name, template=template))
    return tuple(refs)


def assigned_devices(pod: Pod, key: DecisionKey | None) -> tuple[tuple[DeviceAssignment, ...], list[Problem]]:
    """The devices topoplace's binder sealed for the pod on the node it is bound to (schemas/seal.py).

    `topoplace.io/devices` itself is only informational: without a seal that verifies for this
    uid and node (`key`: the seal's; None: none does) the pod holds no devices, only its requests."""
    meta = pod.metadata
    sealed = key.check(meta.uid, pod.spec.node_name or "", meta.annotations) if key is not None else None
    if sealed is None:
        if pod_annotations.DEVICES not in meta.annotations and SEAL not in meta.annotations:
            return (), []
        problem = Problem(object=who(meta), field=f"metadata.annotations[{SEAL}]", reason="no key to verify it")
        return (), [problem]
    if sealed.problem:
        reason = f"{sealed.problem}; the pod counts by its resource requests only"
        return (), [Problem(object=who(meta), field=f"metadata.annotations[{SEAL}]", reason=reason)]
    return sealed.devices or (), []


def bound_event(
    pod: Pod, observed_at: float, *, ours: bool, gang: str = "", key: DecisionKey | None = None
) -> tuple[PodLifecycleEvent, list[Problem]]:
    """A pod on a node, of any scheduler: what it holds there (sealed devices, effective requests)."""
    devices, problems = assigned_devices(pod, key)
    requests, request_problems = pod_requests(pod)
    ports, port_problems = host_ports(pod)
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
        requests=requests,
        ours=ours,
        gang=gang,
        volume_claims=pod_claim_names(meta.name, pod.spec.volumes),
        host_ports=ports,
        observed_at=observed_at,
    )
    event, topology_problems = pod_topology.with_running_topology(event, pod)
    problems += [Problem(object=who(meta), field=f, reason=r) for f, r in (*port_problems, *topology_problems)]
    return pod_priority.running(event, pod), problems + request_problems


def deleted_event(
    uid: str, namespace: str, name: str, node: str, observed_at: float, *, ours: bool = True, gang: str = ""
) -> PodLifecycleEvent:
    return PodLifecycleEvent(
        uid=uid,
        namespace=namespace,
        name=name,
        phase=LifecyclePhase.DELETED,
        node=node,
        ours=ours,
        gang=gang,
        observed_at=observed_at,
    )


# --- nodes ------------------------------------------------------------------------------------


def node_status_event(node: Node, observed_at: float) -> tuple[NodeStatusEvent, list[Problem]]:
    """A taint the API server would have refused is left out and reported."""
    problems: list[Problem] = []
    name = node.metadata.name
    taints = [_decoded(t, Taint, name, f"spec.taints[{i}]", problems) for i, t in enumerate(node.spec.taints)]
    images: list[NodeImage] = []
    for i, image in enumerate(node.status.images):
        if image.size_bytes < 0:
            problems.append(Problem(object=name, field=f"status.images[{i}].sizeBytes", reason="must not be negative"))
            continue
        images.append(NodeImage(names=tuple(image.names), size_bytes=image.size_bytes))
    ready = next((c.status == "True" for c in node.status.conditions if c.type == "Ready"), False)
    event = NodeStatusEvent(
        node=name,
        labels=dict(node.metadata.labels),
        annotations=dict(node.metadata.annotations),
        allocatable={k: str(v) for k, v in node.status.allocatable.items()},
        taints=tuple(t for t in taints if t is not None),
        ready=ready,
        unschedulable=node.spec.unschedulable,
        images=tuple(images),
        resource_version=node.metadata.resource_version,
        observed_at=observed_at,
    )
    return event, problems


def node_deleted_event(name: str, observed_at: float) -> NodeStatusEvent:
    return NodeStatusEvent(node=name, ready=False, deleted=True, observed_at=observed_at)


# --- label selectors ---------------------------------------------------------------------------


def label_selector(selector: obj.LabelSelector) -> LabelSelector:
    return LabelSelector(
        match_labels=dict(selector.match_labels),
        match_expressions=tuple(
            LabelSelectorRequirement(key=e.key, operator=e.operator, values=tuple(e.values))
            for e in selector.match_expressions
        ),
    )
