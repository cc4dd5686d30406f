"""What the demo learns of each pod from `placements` and `bindings`."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from schemas import topics
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    Event,
    PlacementEvent,
    PlacementOutcome,
)
from topoplace.dev.demo.tracker import OutcomeTracker
from topoplace.kafka.records import Received

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736


def received(event: Event, *, traced: bool = True) -> Received:
    context = Context()
    if traced:
        span = SpanContext(trace_id=TRACE_ID, span_id=0x00F067AA0BA902B7, is_remote=True, trace_flags=TraceFlags(1))
        context = trace.set_span_in_context(NonRecordingSpan(span))
    topic = topics.PLACEMENTS.name if isinstance(event, PlacementEvent) else topics.BINDINGS.name
    return Received(topic=topic, partition=0, offset=0, key="k", event=event, trace_context=context, timestamp_ms=0)


def placed(uid: str, score: float) -> PlacementEvent:
    return PlacementEvent(
        decision_id="d", uid=uid, namespace="default", name=uid, pod_resource_version="1",
        outcome=PlacementOutcome.PLACED, node="n1", devices=(DeviceAssignment(index=3),), score=score,
    )  # fmt: skip


def bound(uid: str, outcome: BindingOutcome, reason: str = "") -> BindingEvent:
    return BindingEvent(
        decision_id="d", uid=uid, namespace="default", name=uid, outcome=outcome, node="n1",
        devices=(DeviceAssignment(index=3),), reason=reason, finished_at=12.5,
    )  # fmt: skip


def test_a_bound_pod_carries_its_node_devices_score_and_trace() -> None:
    tracker = OutcomeTracker()
    tracker.apply(received(placed("a", 1820.0)))
    tracker.apply(received(bound("a", BindingOutcome.BOUND)))
    outcome = tracker.by_uid["a"]
    assert (outcome.outcome, outcome.node, outcome.devices, outcome.score) == ("bound", "n1", (3,), 1820.0)
    assert outcome.finished_at == 12.5 and outcome.trace_id == f"{TRACE_ID:032x}"
    assert tracker.final_count({"a", "b"}) == 1 and tracker.count({"a"}, "bound") == 1


def test_conflicts_and_failures_are_not_final_and_bound_wins_over_unschedulable() -> None:
    tracker = OutcomeTracker()
    tracker.apply(received(bound("a", BindingOutcome.CONFLICT, "taken")))
    assert tracker.final_count({"a"}) == 0  # the placer plans it again
    tracker.apply(received(bound("a", BindingOutcome.UNSCHEDULABLE, "no room"), traced=False))
    assert (tracker.by_uid["a"].outcome, tracker.by_uid["a"].reason) == ("unschedulable", "no room")
    assert tracker.by_uid["a"].trace_id == ""
    tracker.apply(received(bound("a", BindingOutcome.BOUND)))
    tracker.apply(received(bound("a", BindingOutcome.UNSCHEDULABLE, "late copy")))
    assert (tracker.by_uid["a"].outcome, tracker.by_uid["a"].reason) == ("bound", "")
