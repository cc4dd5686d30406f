"""A pod that fits nowhere: wait for the victims of its nomination, or make room (preemption.py).

Returns the UNSCHEDULABLE decision to publish with the node the pod is nominated to and the
victims to evict; None when eviction cannot help, or when the node it would choose holds pods
decided there but not yet reported bound (the caller reports the pod unschedulable, with the
reason added).
"""

from __future__ import annotations

from engine import Engine, Mode, PodRequest
from schemas.events import PendingPodEvent, PlacementEvent, PlacementOutcome
from services.placer.parking import AWAITING_REPORT
from services.placer.preemption import PreemptionInput, Room, make_room
from services.placer.requests import decision_id
from services.placer.view import ClusterView


def nominated_placement(
    pending: PendingPodEvent,
    *,
    attempt: int,
    room: Room,
    reason: str,
    now: float,
) -> PlacementEvent:
    """The decision that nominates the pod to the room's node once its victims are gone."""
    return PlacementEvent(
        decision_id=decision_id(pending.uid, pending.resource_version, attempt, room.node, room.devices),
        uid=pending.uid,
        namespace=pending.namespace,
        name=pending.name,
        pod_resource_version=pending.resource_version,
        outcome=PlacementOutcome.UNSCHEDULABLE,
        reason=reason,
        gang=pending.gang,
        requests=dict(pending.requests),
        decided_at=now,
        nominated_node=room.node,
        victims=room.victims,
        priority=pending.priority,
        nominated_devices=room.devices,
    )


def preempt_for(
    view: ClusterView,
    pending: PendingPodEvent,
    request: PodRequest,
    *,
    engine: Engine,
    mode: Mode,
    attempt: int,
    now: float,
) -> tuple[PlacementEvent | None, str]:
    """(the nominating decision, or None and why preemption did not help)."""
    nominated = view.nominations.of(pending.uid, now)
    if nominated is not None:
        waiting = [uid for uid in nominated.victims if view.running_node(uid) == nominated.node]
        if waiting:
            reason = f"waiting for {len(waiting)} pod(s) evicted for it to terminate on node {nominated.node}"
            return None, reason
    seen = PreemptionInput(
        snapshot=view.snapshot(),
        running=view.running_pods(),
        budgets=view.budgets(),
        nominations=tuple(view.nominations.live(now)),
    )
    room = make_room(pending, request, seen, engine=engine, mode=mode, nominated=nominated)
    if not room.node:
        return None, room.reason
    # A pod decided onto that node but not yet reported bound holds devices there that preemption
    # cannot weigh (no priority, labels or start time): victims chosen without it may break a budget
    # or free no usable set. Its report wakes the pod again (parking's REPORTED).
    unreported = view.unreported_on(room.node, but=pending.uid)
    if unreported:
        return None, f"{AWAITING_REPORT} {len(unreported)} pod(s) decided on node {room.node} before choosing victims"
    names = ", ".join(f"{v.namespace}/{v.name}" for v in room.victims)
    reason = f"preempting {len(room.victims)} lower-priority pod(s) on node {room.node}: {names}"
    placement = nominated_placement(pending, attempt=attempt, room=room, reason=reason, now=now)
    view.nominations.apply_placement(placement)  # held at once, before the topic echoes it
    return placement, ""
