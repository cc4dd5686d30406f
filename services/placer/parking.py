"""Pods this placer decided and may have to decide again; pure bookkeeping.

A pod reported unschedulable is *parked* with its last pending event, and
retried when capacity frees. A pod placed is *awaiting binding* until the
cluster reports it bound or deleted, so that a CONFLICT or FAILED answer from
the binder can be re-planned from its request without waiting for the watcher.

This is a convenience of the replica that made the decision, not state the
system depends on: after a restart it is empty, and the cluster watcher's
periodic re-list re-publishes every pod still pending.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import msgspec

from schemas.events import GangPlacementEvent, PendingGangEvent, PendingPodEvent, PlacementOutcome


class TicketState(enum.StrEnum):
    PARKED = "parked"  # reported unschedulable; retried when capacity frees
    AWAITING_BINDING = "awaiting_binding"  # placed; re-planned if the binder rejects it


TraceHeaders = tuple[tuple[str, bytes], ...]


class Ticket(msgspec.Struct, frozen=True, kw_only=True):
    pending: PendingPodEvent
    state: TicketState
    decision_id: str = ""
    rejections: int = 0  # how many of our decisions for the pod the binder rejected
    origin: TraceHeaders = ()  # the pending event's trace headers: later decisions join the pod's trace


class GangTicket(msgspec.Struct, frozen=True, kw_only=True):
    """A gang this replica decided: parked (unschedulable) or awaiting its members' bindings."""

    gang: PendingGangEvent
    state: TicketState
    member_decisions: frozenset[str] = frozenset()  # decision ids of the members placed
    rejections: int = 0
    origin: TraceHeaders = ()


class ParkingLot:
    def __init__(self) -> None:
        self._tickets: dict[str, Ticket] = {}
        self._gangs: dict[str, GangTicket] = {}
        self._member_of: dict[str, str] = {}  # member uid -> gang name

    # --- gangs ---------------------------------------------------------------------------

    def file_gang(self, gang: PendingGangEvent, placement: GangPlacementEvent | None, origin: TraceHeaders) -> None:
        if placement is None:
            self.forget_gang(gang.name)
            return
        before = self._gangs.get(gang.name)
        placed = placement.outcome is PlacementOutcome.PLACED
        self._gangs[gang.name] = GangTicket(
            gang=gang,
            state=TicketState.AWAITING_BINDING if placed else TicketState.PARKED,
            member_decisions=frozenset(m.decision_id for m in placement.members) if placed else frozenset(),
            rejections=before.rejections if before is not None else 0,
            origin=origin or (before.origin if before is not None else ()),
        )
        for member in gang.members:
            self._member_of[member.uid] = gang.name

    def gang_rejected(self, uid: str, decision_id: str) -> GangTicket | None:
        """A member's decision was rejected: the gang's ticket, if that decision is the gang's latest."""
        name = self._member_of.get(uid)
        ticket = self._gangs.get(name) if name is not None else None
        if ticket is None or ticket.state is not TicketState.AWAITING_BINDING:
            return None
        if decision_id not in ticket.member_decisions:
            return None
        ticket = msgspec.structs.replace(ticket, rejections=ticket.rejections + 1, member_decisions=frozenset())
        self._gangs[ticket.gang.name] = ticket
        return ticket

    def parked_gangs(self) -> list[GangTicket]:
        return [t for _, t in sorted(self._gangs.items()) if t.state is TicketState.PARKED]

    def forget_gang(self, name: str) -> None:
        ticket = self._gangs.pop(name, None)
        if ticket is not None:
            for member in ticket.gang.members:
                self._member_of.pop(member.uid, None)

    def _settle_members(self, uids: Iterable[str]) -> None:
        """Members bound or deleted: a gang whose members have all settled is forgotten."""
        for uid in uids:
            name = self._member_of.pop(uid, None)
            if name is None:
                continue
            ticket = self._gangs.get(name)
            if ticket is not None and not any(m.uid in self._member_of for m in ticket.gang.members):
                del self._gangs[name]

    # --- pods ----------------------------------------------------------------------------

    def park(self, pending: PendingPodEvent, *, decision_id: str, origin: TraceHeaders = ()) -> None:
        self._file(pending, TicketState.PARKED, decision_id, origin)

    def await_binding(self, pending: PendingPodEvent, *, decision_id: str, origin: TraceHeaders = ()) -> None:
        self._file(pending, TicketState.AWAITING_BINDING, decision_id, origin)

    def _file(self, pending: PendingPodEvent, state: TicketState, decision_id: str, origin: TraceHeaders) -> None:
        before = self._tickets.get(pending.uid)
        self._tickets[pending.uid] = Ticket(
            pending=pending,
            state=state,
            decision_id=decision_id,
            rejections=before.rejections if before is not None else 0,
            origin=origin or (before.origin if before is not None else ()),
        )

    def rejected(self, uid: str, decision_id: str) -> Ticket | None:
        """The binder rejected a decision: the ticket, if the decision was ours to re-plan."""
        ticket = self._tickets.get(uid)
        if ticket is None or ticket.state is not TicketState.AWAITING_BINDING:
            return None
        if ticket.decision_id != decision_id:
            return None  # an older decision, or another replica's
        ticket = msgspec.structs.replace(ticket, rejections=ticket.rejections + 1)
        self._tickets[uid] = ticket
        return ticket

    def forget(self, uids: Iterable[str]) -> None:
        uids = list(uids)
        for uid in uids:
            self._tickets.pop(uid, None)
        self._settle_members(uids)

    def parked(self) -> list[Ticket]:
        """Parked pods, higher priority first, then oldest first (the order to retry them)."""
        tickets = [t for t in self._tickets.values() if t.state is TicketState.PARKED]
        return sorted(
            tickets,
            key=lambda t: (-t.pending.priority, t.pending.created_at, t.pending.uid),
        )

    def get(self, uid: str) -> Ticket | None:
        return self._tickets.get(uid)

    def counts(self) -> dict[TicketState, int]:
        counts = dict.fromkeys(TicketState, 0)
        for ticket in self._tickets.values():
            counts[ticket.state] += 1
        for gang in self._gangs.values():
            counts[gang.state] += 1
        return counts
