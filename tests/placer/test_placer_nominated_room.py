"""The placer holds a nominated pod's own room, and nothing more, from pods of lower or equal priority
(the engine's rule, which the binder's check follows too): for single pods and for gangs alike."""

from __future__ import annotations

import msgspec
from placer_builders import pending, shares, status, topology
from test_placer_gangs import _cluster, _gang

from engine import Engine
from schemas.events import PendingGangEvent, PlacementEvent, PlacementOutcome
from services.placer.decide import Decider
from services.placer.decide_gang import decide_gang


def nominated(uid: str, node: str, indices: tuple[int, ...], priority: int, *, at: float = 100.0) -> PlacementEvent:
    """A nominating decision, as the placements topic carries it: the preemptor gets `indices` on `node`."""
    return PlacementEvent(
        decision_id=f"d-{uid}",
        uid=uid,
        namespace="default",
        name=f"pod-{uid}",
        pod_resource_version="1",
        outcome=PlacementOutcome.UNSCHEDULABLE,
        reason="preempting",
        nominated_node=node,
        nominated_devices=shares(*indices),
        priority=priority,
        requests={"nvidia.com/gpu": str(len(indices))},
        decided_at=at,
    )


def of_priority(gang: PendingGangEvent, priority: int) -> PendingGangEvent:
    members = tuple(msgspec.structs.replace(m, priority=priority) for m in gang.members)
    return msgspec.structs.replace(gang, members=members)


def test_a_gang_of_lower_or_equal_priority_leaves_a_nominated_pods_devices_alone() -> None:
    """The binder refuses each member on a nominated pod's devices by the member's priority: the gang's
    decision must hold the same room, or it is refused until the nomination expires."""
    for priority in (0, 5):
        view = _cluster()
        view.apply(nominated("hi", "a1", (0, 1, 2, 3), priority=5))
        placed = decide_gang(view, of_priority(_gang("p1", "p2"), priority), engine=Engine(), now=110.0).placement
        assert placed is not None and placed.outcome is PlacementOutcome.PLACED
        assert sorted(m.node for m in placed.members) == ["b1", "b2"]
        assert view.nominations.of("hi", 110.0) is not None


def test_a_gang_of_higher_priority_ignores_the_nominated_room() -> None:
    view = _cluster()
    view.apply(nominated("hi", "a1", (0, 1, 2, 3), priority=5))
    placed = decide_gang(view, of_priority(_gang("p1", "p2"), 6), engine=Engine(), now=110.0).placement
    assert placed is not None and placed.outcome is PlacementOutcome.PLACED
    assert sorted(m.node for m in placed.members) == ["a1", "a2"]


def single_node() -> Decider:
    decider = Decider(engine=Engine())
    decider.on_event(topology("n", 4))
    decider.on_event(status("n", allocatable={"nvidia.com/gpu": "4", "cpu": "64", "memory": "512Gi", "pods": "110"}))
    return decider


def test_an_equal_priority_pod_gets_what_the_victims_freed_beyond_the_nominated_pods_own_devices() -> None:
    decider = single_node()
    decider.on_event(nominated("hi", "n", (0, 1), priority=5), now=100.0)
    peer = decider.on_pending(pending("peer", 2, priority=5), now=110.0).placement
    assert peer is not None and peer.outcome is PlacementOutcome.PLACED
    assert sorted(d.index for d in peer.devices) == [2, 3]
    whole = decider.on_pending(pending("whole", 4, priority=5), now=110.0).placement
    assert whole is not None and whole.outcome is PlacementOutcome.UNSCHEDULABLE


def test_a_higher_priority_pod_ignores_the_nominated_room() -> None:
    decider = single_node()
    decider.on_event(nominated("hi", "n", (0, 1), priority=5), now=100.0)
    higher = decider.on_pending(pending("higher", 4, priority=6), now=110.0).placement
    assert higher is not None and higher.outcome is PlacementOutcome.PLACED and len(higher.devices) == 4
