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

from schemas.events import PendingPodEvent


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


class ParkingLot:
    def __init__(self) -> None:
        self._tickets: dict[str, Ticket] = {}

    def park(self, pending: PendingPodEvent, *, decision_id: str, origin: TraceHeaders = ()) -> None:
        self._file(pending, TicketState.PARKED, decision_id, origin)

    def await_binding(self, pending: PendingPodEvent, *, decision_id: str, origin: TraceHeaders = ()) -> None:
        self._file(pending, TicketState.AWAITING_BINDING, decision_id, origin)

    def _file(
        self, pending: PendingPodEvent, state: TicketState, decision_id: str, origin: TraceHeaders
    ) -> None:
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
        for uid in uids:
            self._tickets.pop(uid, None)

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
        return counts
