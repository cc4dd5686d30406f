"""The placer's gang decisions: one event for the whole gang, members assumed, re-plans, running members."""

from __future__ import annotations

from placer_builders import binding, lifecycle, pending, status, topology

from engine import Engine
from schemas.events import (
    BindingOutcome,
    GangPlacementEvent,
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
