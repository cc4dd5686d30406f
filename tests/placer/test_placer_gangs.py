"""The placer's gang decisions: one event for the whole gang, members assumed, re-plans, running members."""

from __future__ import annotations

import msgspec
from placer_builders import binding, lifecycle, pending, status, topology

from engine import Engine
from schemas.events import (
    BindingOutcome,
    GangPlacementEvent,
    GangTierRefusal,
    HyperNodeEvent,
    HyperNodeMember,
    LifecyclePhase,
    MemberKind,
    NetworkConstraint,
    PendingGangEvent,
    PlacementOutcome,
    RunningMember,
    TopologyMode,
)
from services.placer.decide import Cause, Decider
from services.placer.decide_gang import decide_gang
from services.placer.view import ClusterView

NODES = ("a1", "a2", "b1", "b2")


def _cluster() -> ClusterView:
    view = ClusterView()
    for name in NODES:
        view.apply(topology(name, 4))
        view.apply(status(name))
    for tor, members in (("tor-a", ("a1", "a2")), ("tor-b", ("b1", "b2"))):
        view.apply(
            HyperNodeEvent(
                name=tor, tier=1, members=tuple(HyperNodeMember(kind=MemberKind.NODE, name=m) for m in members)
            )
        )
    return view


def _gang(*uids: str, gpus: int = 4, tier: int = 1, running: tuple[RunningMember, ...] = ()) -> PendingGangEvent:
    return PendingGangEvent(
        name="default/job",
        namespace="default",
        min_member=len(uids) + len(running),
        network=NetworkConstraint(mode=TopologyMode.HARD, highest_tier=tier),
        members=tuple(pending(uid, gpus) for uid in uids),
        running=running,
    )


def test_a_gang_gets_one_decision_and_every_member_is_assumed() -> None:
    view = _cluster()
    result = decide_gang(view, _gang("p1", "p2"), engine=Engine())
    gang = result.placement
    assert gang is not None and gang.outcome is PlacementOutcome.PLACED
    assert (gang.hypernode, gang.tier) == ("tor-a", 1)
    assert sorted(m.node for m in gang.members) == ["a1", "a2"]
    assert all(m.outcome is PlacementOutcome.PLACED for m in gang.members)
    assert all(view.holdings_of(m.uid) for m in gang.members)  # assumed before publishing
    # The next gang cannot reuse the assumed GPUs: it goes to the other ToR.
    other = decide_gang(view, _gang("p3", "p4"), engine=Engine()).placement
    assert other is not None and sorted(m.node for m in other.members) == ["b1", "b2"]


def test_a_replayed_gang_event_gets_the_same_decision() -> None:
    view = _cluster()
    first = decide_gang(view, _gang("p1", "p2"), engine=Engine())
    again = decide_gang(view, _gang("p1", "p2"), engine=Engine())
    assert again.repeated
    assert again.placement is not None and first.placement is not None
    assert again.placement.decision_id == first.placement.decision_id


def test_a_gang_too_big_for_its_tier_is_unschedulable_and_holds_nothing() -> None:
    view = _cluster()
    gang = decide_gang(view, _gang("p1", "p2", "p3"), engine=Engine()).placement
    assert gang is not None and gang.outcome is PlacementOutcome.UNSCHEDULABLE
    assert [m.outcome for m in gang.members] == [PlacementOutcome.UNSCHEDULABLE] * 3
    assert all(m.reason == gang.reason for m in gang.members)
    assert "no hypernode of tier <= 1" in gang.reason
    assert not any(view.holdings_of(uid) for uid in ("p1", "p2", "p3"))


def test_a_rejected_member_re_plans_the_whole_gang() -> None:
    decider = Decider()
    for event in (*(topology(n, 4) for n in NODES), *(status(n) for n in NODES)):
        decider.on_event(event)
    first = decider.on_gang(_gang("p1", "p2")).placement
    assert isinstance(first, GangPlacementEvent)
    rejected = binding(first.members[0], BindingOutcome.CONFLICT, "device taken")
    follow_ups = decider.on_event(rejected)
    replans = [f for f in follow_ups if isinstance(f.placement, GangPlacementEvent)]
    assert len(replans) == 1 and replans[0].cause is Cause.REPLAN
    second = replans[0].placement
    assert isinstance(second, GangPlacementEvent)
    assert second.decision_id != first.decision_id
    rejected_member = first.members[0].uid
    assert any(m.uid == rejected_member and m.outcome is PlacementOutcome.PLACED for m in second.members)


def test_later_members_stay_near_the_running_ones() -> None:
    view = _cluster()
    view.apply(lifecycle("p0", LifecyclePhase.BOUND, "b1", (0, 1, 2, 3)))
    running = (RunningMember(uid="p0", name="pod-p0", node="b1"),)
    gang = decide_gang(view, _gang("p1", tier=1, running=running), engine=Engine()).placement
    assert gang is not None and gang.outcome is PlacementOutcome.PLACED
    assert [m.node for m in gang.members] == ["b2"]  # b1 is full; a1/a2 are under another ToR
    assert gang.hypernode == "tor-b"


def _decider_on(view_events: list[object]) -> Decider:
    decider = Decider()
    for event in view_events:
        decider.on_event(event)  # type: ignore[arg-type]
    return decider


def test_a_gang_whose_minimum_fits_is_placed_at_it_and_the_rest_wait_for_room() -> None:
    """Volcano's minMember: 3 members of 4 GPUs, minimum 2, hard within one ToR of two 4-GPU nodes."""
    hypernodes = [
        HyperNodeEvent(name=tor, tier=1, members=tuple(HyperNodeMember(kind=MemberKind.NODE, name=m) for m in nodes))
        for tor, nodes in (("tor-a", ("a1", "a2")), ("tor-b", ("b1",)))
    ]
    decider = _decider_on([*(topology(n, 4) for n in ("a1", "a2", "b1")), *(status(n) for n in ("a1", "a2", "b1"))])
    for event in hypernodes:
        decider.on_event(event)
    gang = msgspec.structs.replace(_gang("p1", "p2", "p3"), min_member=2)
    first = decider.on_gang(gang).placement
    assert isinstance(first, GangPlacementEvent) and first.outcome is PlacementOutcome.PLACED
    assert sorted((m.name, m.node) for m in first.members) == [("pod-p1", "a1"), ("pod-p2", "a2")]
    assert "placed at its minimum" in first.reason
    assert not decider.view.holdings_of("p3")  # left out: still pending, nothing held for it
    # The placed members bind; the collector sends the gang again with them running.
    for member in first.members:
        decider.on_event(lifecycle(member.uid, LifecyclePhase.BOUND, member.node, (0, 1, 2, 3)))
    running = tuple(RunningMember(uid=m.uid, name=m.name, node=m.node) for m in first.members)
    rest = msgspec.structs.replace(_gang("p3", running=running), min_member=2)
    waiting = decider.on_gang(rest).placement
    assert isinstance(waiting, GangPlacementEvent) and waiting.outcome is PlacementOutcome.UNSCHEDULABLE
    # Room appears inside the running members' ToR: the parked member is placed there, not on b1.
    decider.on_event(topology("a3", 4))
    decider.on_event(status("a3"))
    grown = HyperNodeEvent(
        name="tor-a", tier=1, members=tuple(HyperNodeMember(kind=MemberKind.NODE, name=m) for m in ("a1", "a2", "a3"))
    )
    retried = [f.placement for f in decider.on_event(grown) if isinstance(f.placement, GangPlacementEvent)]
    assert len(retried) == 1 and retried[0].outcome is PlacementOutcome.PLACED
    assert [(m.name, m.node) for m in retried[0].members] == [("pod-p3", "a3")]


def test_a_gang_below_its_minimum_is_still_placed_whole_or_not_at_all() -> None:
    view = _cluster()
    gang = msgspec.structs.replace(_gang("p1", "p2", "p3"), min_member=3)
    placement = decide_gang(view, gang, engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert not any(view.holdings_of(uid) for uid in ("p1", "p2", "p3"))


TOR_REFUSED = GangTierRefusal(tier=1, reason="at most 2 of 3 pending member(s) fit in one hypernode (tor-a)")


def test_a_gang_placed_above_its_lowest_tier_says_why_each_lower_tier_was_refused() -> None:
    view = _cluster()
    spine = (
        HyperNodeMember(kind=MemberKind.HYPERNODE, name="tor-a"),
        HyperNodeMember(kind=MemberKind.HYPERNODE, name="tor-b"),
    )
    view.apply(HyperNodeEvent(name="spine", tier=2, members=spine))
    gang = decide_gang(view, _gang("p1", "p2", "p3", tier=2), engine=Engine()).placement
    assert gang is not None and gang.outcome is PlacementOutcome.PLACED
    assert (gang.hypernode, gang.tier) == ("spine", 2)
    assert gang.refused_tiers == (TOR_REFUSED,)


def test_an_unschedulable_gang_carries_every_tier_refused_and_its_reason_names_them() -> None:
    gang = decide_gang(_cluster(), _gang("p1", "p2", "p3"), engine=Engine()).placement
    assert gang is not None and gang.outcome is PlacementOutcome.UNSCHEDULABLE
    assert gang.refused_tiers == (TOR_REFUSED,)
    assert all(TOR_REFUSED.text() in m.reason for m in gang.members)


def test_a_gang_in_its_lowest_tier_refused_none() -> None:
    gang = decide_gang(_cluster(), _gang("p1", "p2"), engine=Engine()).placement
    assert gang is not None and gang.outcome is PlacementOutcome.PLACED and gang.refused_tiers == ()
