"""One gang's decision against the view; pure and synchronous (the service does the I/O).

A gang arrives whole (`gangs.pending`). Its members' DRA claims (read whole) are allocated by the
engine jointly with the gang's choice and carried in each member's decision (gang_claims.py).
Its members are read against the view:
a member the cluster reports bound, or that already holds a decision of ours,
is *running* for the engine (never placed again; the rest stay near it); the
others are placed together, or, when they do not all fit, at least the gang's
minimum (minMember / minCount, counting the running members, and each subgroup
policy's minSubGroups: the engine's minimum placement, as Volcano places a
gang). The members left out then are not in the decision: they stay pending,
and the collector sends the gang again once the placed ones are bound (its
pending members changed), when they are placed near them, or parked until room
appears if none fits. The answer is one GangPlacementEvent
whose members are ordinary PlacementEvents, so the view, the binder and the
decision ids treat a member like any single pod; each PLACED member is assumed
in the view before anything is published. It carries the engine's refused tiers
(`refused_tiers`): why each tier below the gang's was refused, or, unplaced, each
tier walked, so the binder's message and `topoplace explain` can say why.

Gang decision_id: the first 24 hex digits of SHA-256 over the gang name and its
members' decision ids (UNSCHEDULABLE: over the gang name, the pending members'
uid:resource_version and the gang's rejected-decision count), so a replayed gang
event yields the same decision.
"""

from __future__ import annotations

import hashlib

import msgspec

from engine import Engine, Mode, PodRequest, RequestError, WorkloadClass
from engine.decide.gang import GangDecision, GangRequest, MemberPlacement
from engine.node.dra import Features, ResourceSlice
from schemas.events import (
    GangPlacementEvent,
    GangTierRefusal,
    PendingGangEvent,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
)
from services.placer.dra_allocation import DEFAULT_FEATURES, read_whole
from services.placer.gang_claims import allocated_claims, live_gang_claims, member_claims
from services.placer.preemption import holding_nominated
from services.placer.requests import decision_id, held_placement, pod_request, request_error_text
from services.placer.view import ClusterView

KUEUE_SOURCE = "kueue"  # PendingGangEvent.source of a Kueue pod group: Kueue's gates apply to it alone


class GangResult(msgspec.Struct, frozen=True, kw_only=True):
    placement: GangPlacementEvent | None  # None: nothing to publish (every member is gone)
    repeated: bool = False  # every pending member already held a decision: the same one again


def gang_decision_id(name: str, parts: list[str]) -> str:
    return hashlib.sha256("|".join([name, *parts]).encode()).hexdigest()[:24]


def decide_gang(
    view: ClusterView,
    gang: PendingGangEvent,
    *,
    engine: Engine,
    mode: Mode = Mode.DEFAULT,
    now: float = 0.0,
    node_policy: str | None = None,
    workload: tuple[WorkloadClass, ...] = (),
    kueue_balanced: bool = False,
    features: Features = DEFAULT_FEATURES,
) -> GangResult:
    """Decide every pending member of `gang` at once; PLACED members are assumed in the view.

    `kueue_balanced`: Kueue's TASBalancedPlacement gate (TOPOPLACE_FEATURE_GATES), read by Kueue gangs only;
    `features`: the DRA gates the members' claims are allocated with."""
    members = [m for m in gang.members if not view.is_deleted(m.uid)]
    if not members:
        return GangResult(placement=None)
    held = {m.uid: view.holdings_of(m.uid) for m in members}
    fresh = [m for m in members if not held[m.uid]]
    if not fresh:
        return GangResult(placement=_existing(gang, members, view, now), repeated=True)
    attempt = sum(view.dropped_decisions(m.uid) for m in members)
    claiming = [m for m in fresh if m.claims]
    unready = next((c.waiting for m in claiming for c in m.claims if c.waiting), "")
    if unready:  # kube-scheduler's reason; the gang comes again once the claim exists
        return GangResult(placement=_unschedulable(gang, fresh, attempt, unready, now))
    if any(not read_whole(m.claims) for m in claiming):
        # Claims without their spec (an older watcher): better unschedulable than bound without its devices.
        names = ", ".join(m.name for m in claiming)
        reason = f"invalid gang: DRA ResourceClaims of gang members read without their spec ({names})"
        return GangResult(placement=_unschedulable(gang, fresh, attempt, reason, now))
    dra = view.dra_cluster() if claiming else None
    claims = live_gang_claims(claiming, dra, features) if dra is not None else None
    try:
        pods = [pod_request(m, node_policy=node_policy, volumes=view.storage.rules_for(m)) for m in fresh]
        pods += [pod_request(m, node_policy=node_policy, node_name=held[m.uid][0].node) for m in members if held[m.uid]]
        pods += [PodRequest(uid=r.uid, name=r.name, namespace=gang.namespace, node_name=r.node) for r in gang.running]
        request = GangRequest(
            name=gang.name,
            min_member=gang.min_member,
            network=gang.network,
            sub_groups=gang.sub_groups,
            pods=tuple(pods),
            minimum_placement=True,
            balanced=kueue_balanced and gang.source == KUEUE_SOURCE,
        )
        # Nominated pods' room is held from the gang as from its lowest-priority member (the binder
        # checks each member by its own priority): none of its members takes it.
        lowest = min(m.priority for m in members)
        own = {key for m in members for key in (m.uid, f"{m.namespace}/{m.name}")}
        with holding_nominated(view.index(), view.nominations.live(now), lowest, own) as index:
            decision = engine.place_gang(index, view.network_tree(), request, mode, workload=workload, claims=claims)
    except RequestError as exc:
        return GangResult(
            placement=_unschedulable(gang, fresh, attempt, f"invalid gang: {request_error_text(exc)}", now)
        )
    if not decision.placed:
        refused = refusals_of(decision)
        return GangResult(placement=_unschedulable(gang, fresh, attempt, decision.reason, now, refused))
    by_uid = {p.uid: p for p in decision.pods}
    # At its minimum (decision.partial): the members without a node wait, out of this decision.
    slices = claims.given.slices if claims is not None else ()
    placed = [m for m in fresh if by_uid[m.uid].node]
    carried = allocated_claims(dra)  # a claim's devices go to one member's devices only
    placements = [_member(m, by_uid[m.uid], attempt, now, view, slices, carried) for m in placed]
    for member, placement in zip(placed, placements, strict=True):
        view.assume(placement)  # before anything is published: the next decision cannot reuse them
        view.storage.decided(member, placement.node)  # its claims are in use (ReadWriteOncePod), attached there
    placements += [_held_decision(view, m, now) for m in members if held[m.uid]]
    return GangResult(placement=_gang_event(gang, placements, decision, now))


def _member(
    pending: PendingPodEvent,
    placed: MemberPlacement,
    attempt: int,
    now: float,
    view: ClusterView,
    slices: tuple[ResourceSlice, ...],
    carried: set[str],
) -> PlacementEvent:
    node = placed.node or ""
    claims, gpus = member_claims(pending, placed, view.index().get(node) if node else None, slices, carried)
    devices = (*placed.devices, *gpus)
    return PlacementEvent(
        decision_id=decision_id(pending.uid, pending.resource_version, attempt, node, devices),
        uid=pending.uid,
        namespace=pending.namespace,
        name=pending.name,
        pod_resource_version=pending.resource_version,
        outcome=PlacementOutcome.PLACED,
        node=node,
        devices=devices,
        claims=claims,
        score=placed.score,
        score_parts=dict(placed.score_parts),
        gang=pending.gang,
        qos=placed.qos,
        app_class=placed.app_class,
        requests=dict(pending.requests),
        labels=dict(pending.labels),
        affinities=pending.affinities,
        host_ports=pending.host_ports,
        decided_at=now,
        enforcement=view.enforcement_of(node),
    )


def _held_decision(view: ClusterView, pending: PendingPodEvent, now: float) -> PlacementEvent:
    return held_placement(view.holdings_of(pending.uid)[0], pending, now)


def _existing(
    gang: PendingGangEvent, members: list[PendingPodEvent], view: ClusterView, now: float
) -> GangPlacementEvent:
    placements = [_held_decision(view, m, now) for m in members]
    tree = view.network_tree()
    nodes = [p.node for p in placements if tree.is_node(p.node)] + [
        r.node for r in gang.running if tree.is_node(r.node)
    ]
    hypernode = tree.lca(nodes) if nodes else None
    return GangPlacementEvent(
        decision_id=gang_decision_id(gang.name, sorted(p.decision_id for p in placements)),
        name=gang.name,
        namespace=gang.namespace,
        outcome=PlacementOutcome.PLACED,
        members=tuple(sorted(placements, key=lambda p: (p.name, p.uid))),
        hypernode=hypernode or "",
        tier=tree.tier_of(hypernode) if hypernode else None,
        decided_at=now,
    )


def _gang_event(
    gang: PendingGangEvent, placements: list[PlacementEvent], decision: GangDecision, now: float
) -> GangPlacementEvent:
    return GangPlacementEvent(
        decision_id=gang_decision_id(gang.name, sorted(p.decision_id for p in placements)),
        name=gang.name,
        namespace=gang.namespace,
        outcome=PlacementOutcome.PLACED,
        members=tuple(sorted(placements, key=lambda p: (p.name, p.uid))),
        hypernode=decision.hypernode or "",
        tier=decision.tier,
        reason=decision.reason if decision.partial else "",
        refused_tiers=refusals_of(decision),
        decided_at=now,
    )


def refusals_of(decision: GangDecision) -> tuple[GangTierRefusal, ...]:
    """Why the engine refused each tier below the gang's (every tier walked when unplaced), lowest first."""
    return tuple(GangTierRefusal(tier=r.tier, tier_name=r.tier_name, reason=r.reason) for r in decision.refused_tiers)


def _unschedulable(
    gang: PendingGangEvent,
    pending: list[PendingPodEvent],
    attempt: int,
    reason: str,
    now: float,
    refused: tuple[GangTierRefusal, ...] = (),
) -> GangPlacementEvent:
    members = tuple(
        PlacementEvent(
            decision_id=decision_id(m.uid, m.resource_version, attempt, "", ()),
            uid=m.uid,
            namespace=m.namespace,
            name=m.name,
            pod_resource_version=m.resource_version,
            outcome=PlacementOutcome.UNSCHEDULABLE,
            reason=reason,
            gang=m.gang,
            decided_at=now,
        )
        for m in sorted(pending, key=lambda m: (m.name, m.uid))
    )
    parts = [f"{m.uid}:{m.pod_resource_version}" for m in members] + [str(attempt)]
    return GangPlacementEvent(
        decision_id=gang_decision_id(gang.name, parts),
        name=gang.name,
        namespace=gang.namespace,
        outcome=PlacementOutcome.UNSCHEDULABLE,
        members=members,
        reason=reason,
        refused_tiers=refused,
        decided_at=now,
    )
