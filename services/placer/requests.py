"""What a decision is made of: the engine's request for a pending pod, and the decision_id rule.

decision_id: the first 24 hex digits of SHA-256 over
`uid | pod resource_version | attempt | node | device shares` (see decide.py).
"""

from __future__ import annotations

import hashlib

import engine
from engine import PodRequest
from engine.node.vendor import NODE_POLICY
from schemas.events import DeviceAssignment, PendingPodEvent, PlacementEvent, PlacementOutcome
from schemas.volumes import VolumeRules
from services.placer.view import Holding


def decision_id(
    uid: str,
    resource_version: str,
    attempt: int,
    node: str,
    devices: tuple[DeviceAssignment, ...],
) -> str:
    shares = ",".join(f"{d.index}:{d.memory_mib}:{d.cores}" for d in devices)
    text = "|".join((uid, resource_version, str(attempt), node, shares))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def pod_request(
    pending: PendingPodEvent,
    *,
    node_policy: str | None = None,
    node_name: str = "",
    volumes: VolumeRules | None = None,
) -> PodRequest:
    """The engine's request; `node_policy` is the cluster's choice for a pod that names none; `volumes`
    its claims resolved against the cluster (StorageView.rules_for).

    RequestError for a pod the collector could not publish whole (its reason): its event says
    only who the pod is, and placing it without its constraints would be wrong.
    """
    if pending.unpublishable:
        raise engine.RequestError(f"pod {pending.namespace}/{pending.name}", pending.unpublishable)
    annotations = dict(pending.annotations)
    if node_policy is not None:
        annotations.setdefault(NODE_POLICY, node_policy)
    return PodRequest(
        uid=pending.uid,
        namespace=pending.namespace,
        name=pending.name,
        requests=dict(pending.requests),
        annotations=annotations,
        labels=dict(pending.labels),
        node_selector=dict(pending.node_selector),
        affinity=pending.affinity,
        tolerations=pending.tolerations,
        host_ports=pending.host_ports,
        node_name=node_name,
        affinities=pending.affinities,
        topology_spread_constraints=pending.topology_spread_constraints,
        default_spread_selector=pending.default_spread_selector,
        volumes=volumes,
        images=pending.images,
    )


def request_error_text(exc: engine.RequestError) -> str:
    reason = exc.reason or str(exc)
    return f"{exc.field}: {reason}" if exc.field else reason


def held_placement(holding: Holding, pending: PendingPodEvent, now: float) -> PlacementEvent:
    """The decision behind what a pod already holds: re-emitted as it was, id included.

    A pod bound by the cluster without a decision we know of (placed before the placements
    topic's retention) is described by what it holds, with an id of attempt 0."""
    if holding.decision is not None and holding.decision.node == holding.node:
        return holding.decision
    return PlacementEvent(
        decision_id=decision_id(pending.uid, pending.resource_version, 0, holding.node, holding.devices),
        uid=pending.uid,
        namespace=pending.namespace,
        name=pending.name,
        pod_resource_version=pending.resource_version,
        outcome=PlacementOutcome.PLACED,
        node=holding.node,
        devices=holding.devices,
        gang=pending.gang,
        qos=holding.qos,
        app_class=holding.app_class,
        requests=dict(pending.requests),
        decided_at=now,
    )


def unschedulable_placement(
    pending: PendingPodEvent, attempt: int, reason: str, candidates: int, now: float
) -> PlacementEvent:
    """The decision that the pod fits nowhere now, and why (its id names no node and no devices)."""
    return PlacementEvent(
        decision_id=decision_id(pending.uid, pending.resource_version, attempt, "", ()),
        uid=pending.uid,
        namespace=pending.namespace,
        name=pending.name,
        pod_resource_version=pending.resource_version,
        outcome=PlacementOutcome.UNSCHEDULABLE,
        reason=reason,
        candidates_considered=candidates,
        gang=pending.gang,
        decided_at=now,
    )
