"""A pod the collector could not publish whole is reported unschedulable with the reason, never placed bare."""

from __future__ import annotations

import msgspec
from placer_builders import pending, status, topology

from engine import Engine
from schemas.events import PendingGangEvent, PlacementOutcome
from services.placer.decide import decide
from services.placer.decide_gang import decide_gang
from services.placer.view import ClusterView

REASON = "the pod's scheduling event is 70,000 bytes, over topoplace's bound of 65,536: shorten ..."


def _cluster() -> ClusterView:
    view = ClusterView()
    for node in ("a", "b"):
        view.apply(topology(node, 4))
        view.apply(status(node))
    return view


def test_an_unpublishable_pod_is_unschedulable_with_the_reason_and_holds_nothing() -> None:
    """Its event says only who it is: placed, it would land without its constraints."""
    view = _cluster()
    pod = msgspec.structs.replace(pending("p", 1), requests={}, unpublishable=REASON)
    placement = decide(view, pod, engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason == f"invalid request: pod default/pod-p: {REASON}"
    assert not view.holdings()


def test_a_gang_with_an_unpublishable_member_is_unschedulable_whole() -> None:
    view = _cluster()
    members = (pending("g-0", 1), msgspec.structs.replace(pending("g-1", 1), unpublishable=REASON))
    gang = PendingGangEvent(name="default/job", namespace="default", min_member=2, members=members)
    placement = decide_gang(view, gang, engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason == f"invalid gang: pod default/pod-g-1: {REASON}"
    assert {m.outcome for m in placement.members} == {PlacementOutcome.UNSCHEDULABLE}
    assert not view.holdings()
