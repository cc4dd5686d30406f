"""One pending pod's decision against the view; pure and synchronous (the service does the I/O).

decision_id rule: see decide.py. A pod's ResourceClaims are allocated by the structured allocator
(dra_allocation.py) with the placer's DRA feature gates (`features`: TOPOPLACE_FEATURE_GATES,
topoplace/feature_gates.py), or by the older path for claims an older watcher published (claims.py).
"""

from __future__ import annotations

import msgspec

from engine import Decision, Engine, Mode, PodRequest, RequestError, WorkloadClass
from engine.node.dra import Features
from schemas.dra import ClaimAllocation
from schemas.events import MAX_ALTERNATIVES, Alternative, PendingPodEvent, PlacementEvent, PlacementOutcome
from services.placer.claims import place_claims
from services.placer.decide_preempt import preempt_for
from services.placer.dra_allocation import DEFAULT_FEATURES, place_allocated, read_whole
from services.placer.dra_extended import place_extended
from services.placer.preemption import holding_nominated
from services.placer.requests import (
    decision_id,
    held_placement,
    pod_request,
    request_error_text,
    unschedulable_placement,
)
from services.placer.view import ClusterView


class DecideResult(msgspec.Struct, frozen=True, kw_only=True):
    placement: PlacementEvent | None  # None: nothing to publish (the pod is gone)
    repeated: bool = False  # an earlier decision re-emitted, not a new one
    note: str = ""


def decide(
    view: ClusterView,
    pending: PendingPodEvent,
    *,
    engine: Engine,
    mode: Mode = Mode.DEFAULT,
    now: float = 0.0,
    node_policy: str | None = None,
    workload: tuple[WorkloadClass, ...] = (),
    features: Features = DEFAULT_FEATURES,
) -> DecideResult:
    """Decide one pending pod and, when placed, record the assumption in the view.

    `node_policy` applies to pods that name none; `workload` is the cluster's pod mix,
    which the `fragmentation` node policy weighs; `features` the DRA feature gates.
    """
    if view.is_deleted(pending.uid):
        return DecideResult(placement=None, note="the pod was deleted")
    held = view.holdings_of(pending.uid)
    if held:
        return DecideResult(placement=held_placement(held[0], pending, now), repeated=True)

    attempt = view.dropped_decisions(pending.uid)
    try:
        request = pod_request(pending, node_policy=node_policy, volumes=view.storage.rules_for(pending))

        def place_one(request: PodRequest) -> Decision:
            own = (pending.uid, f"{pending.namespace}/{pending.name}")  # nominated pods' room is held from it
            with holding_nominated(view.index(), view.nominations.live(now), pending.priority, own) as index:
                return engine.place_in(index, request, mode, workload=workload, runners_up=MAX_ALTERNATIVES)

        unready = next((c.waiting for c in pending.claims if c.waiting), "")
        claims: tuple[ClaimAllocation, ...] = ()
        if unready:  # kube-scheduler's reason; the pod comes again once its claim exists
            decision = Decision(node=None, reason=unready)
        elif read_whole(pending.claims):
            cluster, nodes, programs = view.dra_cluster(), view.index().nodes(), engine.dra_programs
            decision, claims = place_allocated(request, pending.claims, cluster, nodes, place_one, programs, features)
        elif pending.claims:
            decision, claims = place_claims(request, pending.claims, view.slices(), place_one, view.allocated_claims())
        else:
            decision, claims = place_one(request), ()
        if decision.node is None and not unready:  # its extended resources may be DRA's to serve (KEP-5004)
            decision, claims = place_extended(
                (decision, claims), request, pending, view, place_one, engine.dra_programs, features
            )
    except RequestError as exc:
        reason = f"invalid request: {request_error_text(exc)}"
        return DecideResult(placement=unschedulable_placement(pending, attempt, reason, 0, now))

    if decision.node is None:
        reason = decision.reason or "no node can host the pod"
        if not pending.claims:  # DRA claims: eviction does not free a claim's devices here
            nominating, why = preempt_for(view, pending, request, engine=engine, mode=mode, attempt=attempt, now=now)
            if nominating is not None:
                return DecideResult(placement=nominating)
            reason += f"; {why}"
        waiting = view.nodes_without_status() if not unready else []  # a missing claim is the whole reason
        if waiting:
            reason += f"; {len(waiting)} node(s) still waiting for their status: " + ", ".join(waiting[:5])
        return DecideResult(
            placement=unschedulable_placement(pending, attempt, reason, decision.candidates_considered, now)
        )

    placement = _placed(view, pending, decision, claims, attempt, now)
    # Recorded before anything is published, so the next decision cannot reuse these devices.
    view.assume(placement)
    view.storage.decided(pending, placement.node)  # its claims are in use (ReadWriteOncePod), attached there
    return DecideResult(placement=placement)


def _placed(
    view: ClusterView,
    pending: PendingPodEvent,
    decision: Decision,
    claims: tuple[ClaimAllocation, ...],
    attempt: int,
    now: float,
) -> PlacementEvent:
    """The placement of a pod the engine found a node for."""
    assert decision.node is not None
    return PlacementEvent(
        decision_id=decision_id(
            pending.uid,
            pending.resource_version,
            attempt,
            decision.node,
            decision.devices,
        ),
        uid=pending.uid,
        namespace=pending.namespace,
        name=pending.name,
        pod_resource_version=pending.resource_version,
        outcome=PlacementOutcome.PLACED,
        node=decision.node,
        devices=decision.devices,
        score=decision.score,
        score_parts=dict(decision.score_parts),
        candidates_considered=decision.candidates_considered,
        gang=pending.gang,
        # The sharing pool the devices run in, as the vendor read it from the pod: the
        # engine keeps pods of other pools off these devices while the decision stands.
        qos=decision.qos,
        app_class=decision.app_class,
        requests=dict(pending.requests),
        labels=dict(pending.labels),
        affinities=pending.affinities,
        host_ports=pending.host_ports,
        decided_at=now,
        claims=claims,
        enforcement=view.enforcement_of(decision.node),
        alternatives=tuple(
            Alternative(node=v.node, score=v.score, reason=v.reason)
            for v in decision.alternatives[:MAX_ALTERNATIVES]
            if v.fits
        ),
    )
