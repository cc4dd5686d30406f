"""decide() and Decider: one decision per pending pod, re-plans and retries, never a device twice."""

from __future__ import annotations

import msgspec
import pytest
from placer_builders import (
    GPU,
    FakeClock,
    binding,
    first_fit,
    lifecycle,
    pending,
    placed,
    status,
    topology,
)
from scripted_engine import ScriptedEngine

from engine import Decision, Engine, Mode, PodRequest, RequestError, Snapshot
from schemas.events import (
    BindingOutcome,
    DeviceAssignment,
    LifecyclePhase,
    PlacementOutcome,
)
from services.placer.decide import MAX_REJECTIONS, Cause, Decider, decide, decision_id
from services.placer.parking import MAX_BACKOFF_S
from services.placer.view import ClusterView


def _cluster(*nodes: tuple[str, int]) -> ClusterView:
    view = ClusterView()
    for name, devices in nodes:
        view.apply(topology(name, devices))
        view.apply(status(name))
    return view


def _decider(*nodes: tuple[str, int]) -> Decider:
    decider = Decider(engine=ScriptedEngine(first_fit), clock=FakeClock())
    for name, devices in nodes:
        decider.on_event(topology(name, devices))
        decider.on_event(status(name))
    return decider


def _past_backoff(decider: Decider) -> None:
    """Time passes: every parked pod's backoff is over (an event then retries it at once)."""
    clock = decider.parking.clock
    assert isinstance(clock, FakeClock)
    clock.advance(MAX_BACKOFF_S)


def _devices_in_use(view: ClusterView) -> list[tuple[str, int]]:
    return [(h.node, d.index) for h in view.holdings() for d in h.devices]


# --- decision_id ---------------------------------------------------------------------------


def test_decision_id_is_deterministic_and_depends_on_every_part() -> None:
    devices = (DeviceAssignment(index=0), DeviceAssignment(index=1))
    base = decision_id("u", "7", 0, "a", devices)
    assert base == decision_id("u", "7", 0, "a", devices)
    variants = {
        decision_id("v", "7", 0, "a", devices),
        decision_id("u", "8", 0, "a", devices),
        decision_id("u", "7", 1, "a", devices),
        decision_id("u", "7", 0, "b", devices),
        decision_id("u", "7", 0, "a", devices[:1]),
        decision_id("u", "7", 0, "a", (DeviceAssignment(index=0, memory_mib=4000), devices[1])),
    }
    assert base not in variants and len(variants) == 6


# --- decide --------------------------------------------------------------------------------


def test_placed_decision_carries_the_engine_answer_and_is_assumed() -> None:
    view = _cluster(("a", 4))
    pod = pending("p", 2, rv="5")
    engine_answer = first_fit(view.snapshot(), PodRequest(uid="p", requests={GPU: "2"}))
    result = decide(view, pod, engine=ScriptedEngine(first_fit), now=12.5)
    placement = result.placement
    assert placement is not None and result.repeated is False
    assert placement.outcome is PlacementOutcome.PLACED
    assert (placement.node, placement.devices) == (
        engine_answer.node,
        engine_answer.devices,
    )
    assert placement.score == engine_answer.score and placement.score_parts == engine_answer.score_parts
    assert placement.candidates_considered == engine_answer.candidates_considered
    assert (placement.uid, placement.pod_resource_version, placement.decided_at) == (
        "p",
        "5",
        12.5,
    )
    assert placement.decision_id == decision_id("p", "5", 0, placement.node, placement.devices)
    assert [(h.node, [d.index for d in h.devices]) for h in view.holdings_of("p")] == [
        (placement.node, [d.index for d in placement.devices])
    ]


def test_the_next_decision_cannot_reuse_assumed_devices() -> None:
    view = _cluster(("a", 4), ("b", 4))
    for uid in "pqrs":
        decide(view, pending(uid, 2), engine=ScriptedEngine(first_fit))
    in_use = _devices_in_use(view)
    assert len(in_use) == 8 and len(set(in_use)) == 8
    last = decide(view, pending("t", 1), engine=ScriptedEngine(first_fit)).placement
    assert last is not None and last.outcome is PlacementOutcome.UNSCHEDULABLE


def test_duplicate_pending_event_repeats_the_same_decision() -> None:
    view = _cluster(("a", 4))
    first = decide(view, pending("p", 2), engine=ScriptedEngine(first_fit)).placement
    again = decide(view, pending("p", 2, rv="6"), engine=ScriptedEngine(first_fit))
    assert again.repeated is True
    assert again.placement == first
    assert len(_devices_in_use(view)) == 2


def test_pending_event_of_a_bound_pod_describes_its_binding() -> None:
    view = _cluster(("a", 4))
    view.apply(lifecycle("p", LifecyclePhase.BOUND, "a", (3,)))
    result = decide(view, pending("p", 1), engine=ScriptedEngine(first_fit))
    assert result.repeated is True
    assert result.placement is not None
    assert (result.placement.node, [d.index for d in result.placement.devices]) == (
        "a",
        [3],
    )
    assert len(_devices_in_use(view)) == 1


def test_deleted_pod_gets_no_decision() -> None:
    view = _cluster(("a", 4))
    view.apply(lifecycle("p", LifecyclePhase.DELETED))
    result = decide(view, pending("p", 1), engine=ScriptedEngine(first_fit))
    assert result.placement is None and "deleted" in result.note
    assert view.holdings() == []


def test_unschedulable_carries_the_engine_reason_and_nodes_without_status() -> None:
    view = _cluster(("a", 1))
    view.apply(topology("late", 8))  # no status yet
    placement = decide(view, pending("p", 4), engine=ScriptedEngine(first_fit)).placement
    assert placement is not None
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason.startswith("no node has 4 free devices")
    assert "late" in placement.reason
    assert placement.node == "" and placement.devices == ()
    assert view.holdings() == []


def test_malformed_request_is_unschedulable_with_field_and_reason() -> None:
    def rejecting(snapshot: Snapshot, request: PodRequest, mode: Mode) -> Decision:
        raise RequestError("nvidia.com/gpumem", "must be a whole number of MiB, got 'lots'")

    view = _cluster(("a", 4))
    placement = decide(view, pending("p", 1), engine=ScriptedEngine(rejecting)).placement
    assert placement is not None
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "nvidia.com/gpumem" in placement.reason and "got 'lots'" in placement.reason
    assert view.holdings() == []


def test_mode_and_request_reach_the_engine() -> None:
    seen: list[tuple[PodRequest, Mode]] = []

    def recording(snapshot: Snapshot, request: PodRequest, mode: Mode) -> Decision:
        seen.append((request, mode))
        return first_fit(snapshot, request, mode)

    pod = msgspec.structs.replace(pending("p", 1), annotations={"k": "v"}, labels={"l": "m"})
    decide(_cluster(("a", 1)), pod, mode=Mode.HAMI, engine=ScriptedEngine(recording))
    request, mode = seen[0]
    assert mode is Mode.HAMI
    assert (request.uid, request.namespace, request.name) == (
        "p",
        pod.namespace,
        pod.name,
    )
    assert (request.requests, request.annotations, request.labels) == (
        pod.requests,
        {"k": "v"},
        {"l": "m"},
    )


# --- Decider: parked pods ------------------------------------------------------------------


def test_parked_pod_is_placed_when_a_deletion_frees_room() -> None:
    decider = _decider(("a", 2))
    first = decider.on_pending(pending("p", 2)).placement
    assert first is not None and first.outcome is PlacementOutcome.PLACED
    assert decider.on_pending(pending("q", 2)).placement.outcome is PlacementOutcome.UNSCHEDULABLE  # type: ignore[union-attr]
    decider.on_event(binding(first, BindingOutcome.BOUND))
    assert decider.on_event(lifecycle("p", LifecyclePhase.BOUND, "a", (0, 1))) == []
    _past_backoff(decider)
    retried = decider.on_event(lifecycle("p", LifecyclePhase.DELETED))
    assert [(r.placement.uid, r.placement.outcome, r.placement.node, r.cause) for r in retried] == [
        ("q", PlacementOutcome.PLACED, "a", Cause.RETRY)
    ]
    # Placed now: a further free-up does not place it again.
    assert decider.on_event(topology("b", 2)) == []


def test_parked_pod_stays_silent_while_it_still_does_not_fit() -> None:
    decider = _decider(("a", 1))
    decider.on_pending(pending("p", 4))
    _past_backoff(decider)
    assert decider.on_event(topology("b", 2)) == []
    assert decider.on_event(status("b")) == []
    # c's topology queues the pod and its retry fails (no status yet): backoff doubled; c's status
    # queues it again, and the first tick after the backoff places it.
    assert decider.on_event(topology("c", 4)) + decider.on_event(status("c")) == []
    _past_backoff(decider)
    assert [r.placement.uid for r in decider.tick()] == ["p"]


def test_parked_pods_are_retried_by_priority() -> None:
    decider = _decider(("a", 1))
    decider.on_pending(pending("blocker", 1))
    decider.on_pending(pending("low", 1, priority=1))
    decider.on_pending(pending("high", 1, priority=9))
    _past_backoff(decider)
    retried = decider.on_event(lifecycle("blocker", LifecyclePhase.DELETED))
    assert [r.placement.uid for r in retried] == ["high"]


def test_parked_pod_forgotten_once_bound_elsewhere() -> None:
    decider = _decider(("a", 1))
    decider.on_pending(pending("p", 2))
    decider.on_event(lifecycle("p", LifecyclePhase.BOUND, "a", (0,)))
    assert decider.parking.get("p") is None


# --- Decider: the binder's rejections ------------------------------------------------------


def test_conflict_is_replanned_with_a_new_decision_id() -> None:
    decider = _decider(("a", 2), ("b", 2))
    first = decider.on_pending(pending("p", 2)).placement
    assert first is not None
    replans = decider.on_event(binding(first, BindingOutcome.CONFLICT, "devices taken"))
    assert [r.cause for r in replans] == [Cause.REPLAN]
    second = replans[0].placement
    assert second.outcome is PlacementOutcome.PLACED
    assert second.decision_id != first.decision_id
    assert second.decision_id == decision_id("p", "1", 1, second.node, second.devices)
    assert len(_devices_in_use(decider.view)) == 2  # only the new decision holds devices


def test_rejected_decision_of_another_replica_is_not_replanned_here() -> None:
    decider = _decider(("a", 2))
    theirs = placed("p", "a", (0, 1))
    decider.on_event(theirs)
    assert decider.on_event(binding(theirs, BindingOutcome.CONFLICT)) == []
    assert decider.view.holdings() == []


def test_rejection_frees_room_for_parked_pods() -> None:
    decider = _decider(("a", 2))
    theirs = placed("p", "a", (0, 1))
    decider.on_event(theirs)
    assert decider.on_pending(pending("q", 2)).placement.outcome is PlacementOutcome.UNSCHEDULABLE  # type: ignore[union-attr]
    _past_backoff(decider)
    retried = decider.on_event(binding(theirs, BindingOutcome.FAILED))
    assert [(r.placement.uid, r.placement.outcome, r.cause) for r in retried] == [
        ("q", PlacementOutcome.PLACED, Cause.RETRY)
    ]


def test_repeated_rejections_end_in_unschedulable() -> None:
    decider = _decider(("a", 4))
    placement = decider.on_pending(pending("p", 1)).placement
    outcomes = []
    for _ in range(MAX_REJECTIONS):
        assert placement is not None
        answers = decider.on_event(binding(placement, BindingOutcome.FAILED, "API unavailable"))
        assert [a.cause for a in answers] == [Cause.REPLAN]
        placement = answers[0].placement
        outcomes.append(placement.outcome)
    assert outcomes == [PlacementOutcome.PLACED] * (MAX_REJECTIONS - 1) + [PlacementOutcome.UNSCHEDULABLE]
    assert placement is not None and "API unavailable" in placement.reason
    assert decider.view.holdings() == []
    assert decider.parking.get("p") is None


@pytest.mark.parametrize("count", [1, 3])
def test_replayed_decisions_rebuild_the_same_assumptions(count: int) -> None:
    """A new placer following the placements it (or a peer) produced holds the same devices."""
    live = _decider(("a", 4), ("b", 4))
    produced = [live.on_pending(pending(f"p{i}", count)).placement for i in range(3)]
    restarted = _decider(("a", 4), ("b", 4))
    for placement in produced:
        assert placement is not None
        restarted.on_event(placement)
    assert sorted(_devices_in_use(restarted.view)) == sorted(_devices_in_use(live.view))
    again = restarted.on_pending(pending("p1", count))
    assert again.repeated and again.placement == produced[1]


# --- with the real engine ------------------------------------------------------------------


def test_real_engine_decisions_never_share_a_device() -> None:
    """The default place function is the engine's; its assumptions keep pods apart."""
    view = _cluster(("a", 8))
    placements = [decide(view, pending(f"p{i}", 2), engine=Engine()).placement for i in range(5)]
    placed_ones = [p for p in placements if p is not None and p.outcome is PlacementOutcome.PLACED]
    assert len(placed_ones) == 4  # 8 devices, 2 each
    shares = [(p.node, d.index) for p in placed_ones for d in p.devices]
    assert len(shares) == len(set(shares)) == 8
    last = placements[-1]
    assert last is not None and last.outcome is PlacementOutcome.UNSCHEDULABLE and last.reason


def test_real_engine_malformed_request_is_unschedulable() -> None:
    view = _cluster(("a", 2))
    placement = decide(view, pending("p", 1, **{"nvidia.com/gpumem": "lots"}), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "nvidia.com/gpumem" in placement.reason


def test_follow_ups_carry_the_pods_own_trace_headers() -> None:
    decider = _decider(("a", 1))
    headers = (("traceparent", b"00-5b8aa5a2d2c872e8321cf37308d69df2-00f067aa0ba902b7-01"),)
    first = decider.on_pending(pending("p", 1), origin=headers).placement
    decider.on_pending(pending("q", 1), origin=(("traceparent", b"other"),))  # parked
    assert first is not None
    replans = decider.on_event(binding(first, BindingOutcome.CONFLICT))
    by_pod = {f.placement.uid: f.origin for f in replans}
    assert by_pod["p"] == headers


def test_assumed_shares_keep_the_pool_the_engine_read() -> None:
    # The vendor reads the pod's sharing pool and class; the placement and the assumed
    # allocations carry them, so the engine keeps other pools off those devices meanwhile.
    def pooled(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT) -> Decision:
        return msgspec.structs.replace(first_fit(snapshot, request, mode), qos="fixed-share", app_class="offline")

    view = _cluster(("a", 2))
    placement = decide(view, pending("p", 1), engine=ScriptedEngine(pooled)).placement
    assert placement is not None and (placement.qos, placement.app_class) == ("fixed-share", "offline")
    [node] = view.snapshot().nodes
    assert {(a.qos, a.app_class) for a in node.allocations} == {("fixed-share", "offline")}
