"""Follows `placements` and `bindings` to learn what became of each demo pod."""

from __future__ import annotations

import msgspec
from opentelemetry import trace

from schemas.events import BindingEvent, BindingOutcome, GangPlacementEvent, PlacementEvent, PlacementOutcome
from topoplace.kafka.records import Received


class PodOutcome(msgspec.Struct, kw_only=True):
    outcome: str = "pending"  # bound | unschedulable | pending
    node: str = ""
    devices: tuple[int, ...] = ()
    score: float = 0.0
    reason: str = ""
    finished_at: float | None = None
    trace_id: str = ""
    gang: str = ""  # "<namespace>/<group>" of a gang member
    hypernode: str = ""  # the gang's lowest common hypernode, when placed
    tier: int | None = None


class OutcomeTracker:
    """uid -> the latest known outcome; `final` once a pod is bound or unschedulable."""

    def __init__(self) -> None:
        self.by_uid: dict[str, PodOutcome] = {}

    def apply(self, received: Received) -> None:
        event = received.event
        if isinstance(event, GangPlacementEvent):
            for member in event.members:
                outcome = self.by_uid.setdefault(member.uid, PodOutcome())
                outcome.gang = event.name
                if event.outcome == PlacementOutcome.PLACED:
                    outcome.score, outcome.hypernode, outcome.tier = member.score, event.hypernode, event.tier
            return
        if isinstance(event, PlacementEvent):
            outcome = self.by_uid.setdefault(event.uid, PodOutcome())
            if event.outcome == PlacementOutcome.PLACED:
                outcome.score = event.score
        elif isinstance(event, BindingEvent):
            outcome = self.by_uid.setdefault(event.uid, PodOutcome())
            if event.outcome == BindingOutcome.BOUND:
                outcome.outcome = "bound"
                outcome.node = event.node
                outcome.devices = tuple(d.index for d in event.devices)
                outcome.reason = ""
            elif event.outcome == BindingOutcome.UNSCHEDULABLE and outcome.outcome != "bound":
                outcome.outcome = "unschedulable"
                outcome.reason = event.reason
            else:
                return  # conflict / failed: the placer plans the pod again
            outcome.finished_at = event.finished_at
            span_context = trace.get_current_span(received.trace_context).get_span_context()
            if span_context.is_valid:
                outcome.trace_id = f"{span_context.trace_id:032x}"

    def final_count(self, uids: set[str]) -> int:
        return sum(1 for uid in uids if self.by_uid.get(uid, PodOutcome()).outcome in ("bound", "unschedulable"))

    def count(self, uids: set[str], outcome: str) -> int:
        return sum(1 for uid in uids if self.by_uid.get(uid, PodOutcome()).outcome == outcome)
