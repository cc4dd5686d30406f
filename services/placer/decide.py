"""Decisions for pending pods; pure and synchronous (the service does the I/O).

`decide` (decide_pod.py) turns one PendingPodEvent into one PlacementEvent against the view,
`decide_gang` (decide_gang.py) one PendingGangEvent into one GangPlacementEvent;
`Decider` adds what follows from the other topics: re-planning a decision the
binder rejected, and retrying parked pods when an event could help them (a bounded
number per event or tick, each after its backoff: see parking.py).

decision_id rule: the first 24 hex digits of SHA-256 over
`uid | pod resource_version | attempt | node | device shares`, where attempt is
the number of this pod's decisions the binder has rejected so far (so a
re-plan after a conflict never reuses a rejected id, even for the same
devices), node is "" and the shares empty when unschedulable, and the shares are
`index:memory_mib:cores` joined by ",". A pod that already holds devices in
the view gets its existing decision re-emitted unchanged, id included: a
duplicated or replayed pending event yields the same decision, never a second one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import msgspec

from engine import Engine, Mode
from schemas.enforcement import Enforcement
from schemas.events import (
    BindingEvent,
    Event,
    GangPlacementEvent,
    PendingGangEvent,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
)
from services.placer.decide_gang import GangResult, decide_gang
from services.placer.decide_pod import DecideResult as DecideResult
from services.placer.decide_pod import decide as decide
from services.placer.growth import event_growth, tombstone_growth
from services.placer.parking import GangTicket, Growth, ParkingLot, Ticket, TraceHeaders
from services.placer.requests import decision_id as decision_id
from services.placer.requests import pod_request as pod_request
from services.placer.requests import unschedulable_placement
from services.placer.view import ClusterView, ViewChange
from services.placer.workload_mix import WorkloadMix
from topoplace.feature_gates import FeatureGates

# After this many rejected decisions in a row a pod is reported unschedulable and
# left to the watcher's re-list, so a binder that keeps failing cannot make us loop.
MAX_REJECTIONS = 3

# Parked pods decided again per event or tick, at most: 2,000 parked pods re-decided on every
# event that freed something held the event loop for seconds each time.
RETRY_BUDGET = 32


class Cause(enum.StrEnum):
    """Why a decision was published (a metrics label and a span attribute)."""

    PENDING = "pending"  # a pending event, decided afresh
    REPEATED = "repeated"  # a pending event of a pod that already holds devices: the same decision again
    REPLAN = "replan"  # the binder rejected our decision for the pod
    RETRY = "retry"  # a parked pod fits now


class FollowUp(msgspec.Struct, frozen=True, kw_only=True):
    """A decision that a state event made possible."""

    placement: PlacementEvent | GangPlacementEvent
    cause: Cause
    origin: TraceHeaders = ()  # the pod's pending event's trace headers, when this replica has them


class Decider:
    """The view, the parked pods and the engine together: every decision the placer makes."""

    def __init__(
        self,
        *,
        mode: Mode = Mode.DEFAULT,
        engine: Engine | None = None,
        node_policy: str | None = None,
        default_enforcement: Enforcement | None = None,
        clock: Callable[[], float] | None = None,
        feature_gates: FeatureGates | None = None,
    ) -> None:
        """`engine`: the engine every decision uses (one of its own when None); `clock`: monotonic seconds
        for the parked pods' backoff (time.monotonic by default); `feature_gates`: the DRA gates its
        allocator reads and Kueue's its Kueue gangs read (TOPOPLACE_FEATURE_GATES; upstream defaults when None)."""
        self.engine = engine if engine is not None else Engine()
        gates = feature_gates if feature_gates is not None else FeatureGates()
        self.dra_features = gates.dra_features()
        self.kueue_balanced = gates.kueue_balanced_placement
        # A policy reading the workload (fragmentation) weighs CPU: the index reads each node's, the mix each pod's.
        weighs_cpu = self.engine.vendors.policies.reads_workload(node_policy)
        self.view = ClusterView(cpu_in_index=weighs_cpu)
        self.view.default_enforcement = default_enforcement
        self.parking = ParkingLot(clock) if clock is not None else ParkingLot()
        self.mix = WorkloadMix(with_cpu=weighs_cpu)
        self.mode = mode
        self.node_policy = node_policy

    def _decide(self, pending: PendingPodEvent, now: float) -> DecideResult:
        return decide(
            self.view,
            pending,
            engine=self.engine,
            mode=self.mode,
            now=now,
            node_policy=self.node_policy,
            workload=self.mix.classes(),
            features=self.dra_features,
        )

    def on_pending(self, pending: PendingPodEvent, *, now: float = 0.0, origin: TraceHeaders = ()) -> DecideResult:
        self.mix.observe(pending)
        result = self._decide(pending, now)
        self._file(pending, result.placement, origin)
        return result

    def on_gang(self, gang: PendingGangEvent, *, now: float = 0.0, origin: TraceHeaders = ()) -> GangResult:
        for member in gang.members:
            self.mix.observe(member)
        result = self._decide_gang(gang, now)
        self.parking.file_gang(gang, result.placement, origin)
        return result

    def _decide_gang(self, gang: PendingGangEvent, now: float) -> GangResult:
        return decide_gang(
            self.view,
            gang,
            engine=self.engine,
            mode=self.mode,
            now=now,
            node_policy=self.node_policy,
            workload=self.mix.classes(),
            kueue_balanced=self.kueue_balanced,
            features=self.dra_features,
        )

    def on_event(self, event: Event, *, now: float = 0.0) -> list[FollowUp]:
        """Apply a state event; return the decisions it makes possible (re-plans, retries)."""
        change = self.view.apply(event)
        return self._react(change, event_growth(event, change), now)

    def on_tombstone(self, topic: str, key: str, *, now: float = 0.0) -> list[FollowUp]:
        change = self.view.apply_tombstone(topic, key)
        return self._react(change, tombstone_growth(topic, change), now)

    def tick(self, *, now: float = 0.0) -> list[FollowUp]:
        """Periodic: queue the pods parked too long, and decide the queued ones whose backoff has passed."""
        self.parking.flush_leftovers()
        return self._retry_parked(now)

    def retract(self, placement: PlacementEvent | GangPlacementEvent) -> None:
        """Undo a fresh decision that could not be published; its pod (or gang) is read again later."""
        if isinstance(placement, GangPlacementEvent):
            for member in placement.members:
                self.view.retract(member)
            self.parking.forget_gang(placement.name)
            return
        self.view.retract(placement)
        self.parking.forget([placement.uid])

    def _react(self, change: ViewChange, growth: Growth, now: float) -> list[FollowUp]:
        self.parking.forget(change.settled)
        out: list[FollowUp] = []
        replanned: set[str] = set()
        for rejected in change.dropped:
            gang_ticket = self.parking.gang_rejected(rejected.uid, rejected.decision_id)
            if gang_ticket is not None:
                if gang_ticket.gang.name not in replanned:
                    replanned.add(gang_ticket.gang.name)
                    out += self._replan_gang(gang_ticket, rejected, now)
                continue
            ticket = self.parking.rejected(rejected.uid, rejected.decision_id)
            if ticket is not None:
                out += [
                    FollowUp(placement=p, cause=Cause.REPLAN, origin=ticket.origin)
                    for p in self._replan(ticket, rejected, now)
                ]
        if change.capacity_grew or change.dropped or change.pods_moved or change.reported:
            self.parking.queue_helped(growth)
            out += self._retry_parked(now)
            out += self._retry_parked_gangs(now)
        return out

    def _replan_gang(self, ticket: GangTicket, rejected: BindingEvent, now: float) -> list[FollowUp]:
        """A member's binding was refused: the whole gang is decided again (members bound meanwhile stay)."""
        if ticket.rejections >= MAX_REJECTIONS:
            self.parking.forget_gang(ticket.gang.name)
            return []
        result = self._decide_gang(ticket.gang, now)
        self.parking.file_gang(ticket.gang, result.placement, ticket.origin)
        if result.placement is None:
            return []
        return [FollowUp(placement=result.placement, cause=Cause.REPLAN, origin=ticket.origin)]

    def _retry_parked_gangs(self, now: float) -> list[FollowUp]:
        placed: list[FollowUp] = []
        for ticket in self.parking.parked_gangs():
            result = self._decide_gang(ticket.gang, now)
            if result.placement is not None and result.placement.outcome is PlacementOutcome.PLACED:
                self.parking.file_gang(ticket.gang, result.placement, ticket.origin)
                placed.append(FollowUp(placement=result.placement, cause=Cause.RETRY, origin=ticket.origin))
        return placed

    def _replan(self, ticket: Ticket, rejected: BindingEvent, now: float) -> list[PlacementEvent]:
        pending = ticket.pending
        if ticket.rejections >= MAX_REJECTIONS:
            reason = (
                f"the binder rejected {ticket.rejections} placements in a row"
                f" (last: {rejected.outcome.value}: {rejected.reason or 'no reason given'})"
            )
            self.parking.forget([pending.uid])
            return [unschedulable_placement(pending, self.view.dropped_decisions(pending.uid), reason, 0, now)]
        result = self._decide(pending, now)
        self._file(pending, result.placement, ticket.origin)
        return [result.placement] if result.placement is not None else []

    def _retry_parked(self, now: float) -> list[FollowUp]:
        """Decide again the queued parked pods whose backoff has passed, RETRY_BUDGET at most."""
        placed: list[FollowUp] = []
        for ticket in self.parking.take_ready(RETRY_BUDGET):
            result = self._decide(ticket.pending, now)
            # Still unschedulable: parked again, its backoff doubled; nothing new said (it was reported),
            # unless it now preempts: its victims are news the binder must hear.
            self._file(ticket.pending, result.placement, ticket.origin)
            if result.placement is not None and (
                result.placement.outcome is PlacementOutcome.PLACED or result.placement.victims
            ):
                placed.append(FollowUp(placement=result.placement, cause=Cause.RETRY, origin=ticket.origin))
        return placed

    def _file(self, pending: PendingPodEvent, placement: PlacementEvent | None, origin: TraceHeaders) -> None:
        if placement is None:
            self.parking.forget([pending.uid])
        elif placement.outcome is PlacementOutcome.PLACED:
            self.parking.await_binding(pending, decision_id=placement.decision_id, origin=origin)
        else:
            self.parking.park(pending, decision_id=placement.decision_id, origin=origin, reason=placement.reason)
