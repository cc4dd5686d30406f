"""Pods this placer decided and may have to decide again; pure bookkeeping.

A pod reported unschedulable is *parked* with its last pending event, and
retried as kube-scheduler retries its unschedulable pods (its unschedulable queue,
backoff queue and queueing hints are the model):

- a parked pod is *queued* again only by an event that could help it (`Growth`
  against the pod's `RetryHint`): a node added, opened, relabelled or untainted
  helps every pod; freed devices help pods that ask for devices; a changed
  ResourceSlice helps pods with claims or asking an extended resource (KEP-5004); a pod leaving a node helps pods that
  lacked its host resources (cpu, memory, a pod slot); a pod coming, leaving or
  changing on a node helps pods with pod (anti-)affinity or spread, or held by
  running pods' anti-affinity; a pod decided onto a node being reported there
  helps a preemption that waited to know every pod of that node;
- a queued pod is decided again only once its backoff has passed: 1 s after its
  first failure, doubling up to 10 s (podInitialBackoffSeconds, podMaxBackoffSeconds);
- each event or tick re-decides at most a budget of queued pods, higher priority
  first, then the longest queued; the rest wait for the next tick;
- a pod parked for 5 minutes (podMaxInUnschedulablePodsDuration) is queued whatever
  happened, so that no pod is parked forever on a hint that was wrong. A pod placed is *awaiting binding* until the
cluster reports it bound or deleted, so that a CONFLICT or FAILED answer from
the binder can be re-planned from its request without waiting for the watcher.

This is a convenience of the replica that made the decision, not state the
system depends on: after a restart it is empty, and the cluster watcher's
periodic re-list re-publishes every pod still pending.
"""

from __future__ import annotations

import enum
import itertools
import re
import time
from collections.abc import Callable, Iterable

import msgspec

from schemas.events import GangPlacementEvent, PendingGangEvent, PendingPodEvent, PlacementOutcome
from schemas.quantity import QuantityError, parse_quantity


class TicketState(enum.StrEnum):
    PARKED = "parked"  # reported unschedulable; retried when capacity frees
    AWAITING_BINDING = "awaiting_binding"  # placed; re-planned if the binder rejects it


TraceHeaders = tuple[tuple[str, bytes], ...]


INITIAL_BACKOFF_S = 1.0  # kube-scheduler's podInitialBackoffSeconds
MAX_BACKOFF_S = 10.0  # podMaxBackoffSeconds
MAX_PARKED_S = 300.0  # podMaxInUnschedulablePodsDuration: then retried whatever happened

_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")
TOO_MANY_PODS = "Too many pods"
# A preemption's reason while the node it would choose holds pods decided but not yet reported bound.
AWAITING_REPORT = "waiting for the cluster to report"


class Growth(enum.Flag):
    """What an event freed or changed, as far as parked pods are concerned."""

    NONE = 0
    NODES = enum.auto()  # a node came, opened, or its labels, taints, allocatable, devices or network changed
    DEVICES = enum.auto()  # device shares released, or a device healthy again
    CLAIMS = enum.auto()  # a DRA ResourceSlice added or changed
    HOST = enum.auto()  # a pod's requests left a node: cpu, memory, a pod slot
    PODS = enum.auto()  # a pod came to, left or changed on a node (its labels, pod affinity): affinity, spread
    VOLUMES = enum.auto()  # a PersistentVolumeClaim, PersistentVolume or StorageClass changed
    REPORTED = enum.auto()  # a pod decided onto a node is now reported there by the cluster


class RetryHint(msgspec.Struct, frozen=True, kw_only=True):
    """Which growths could help a parked pod (every pod is helped by NODES)."""

    devices: bool = False  # it asks for devices (an extended resource) or has claims
    claims: bool = False
    host: bool = False  # its reason names a host resource it lacked
    pods: bool = False  # it has pod (anti-)affinity or spread constraints, or running pods' anti-affinity held it
    volumes: bool = False  # it mounts PersistentVolumeClaims
    reported: bool = False  # its preemption waits for the cluster to report the pods decided onto a node

    def helped_by(self, growth: Growth) -> bool:
        return bool(
            growth & Growth.NODES
            or (growth & Growth.DEVICES and self.devices)
            or (growth & Growth.CLAIMS and self.claims)
            or (growth & Growth.HOST and self.host)
            or (growth & Growth.PODS and self.pods)
            or (growth & Growth.VOLUMES and self.volumes)
            or (growth & Growth.REPORTED and self.reported)
        )


def retry_hint(pending: PendingPodEvent, reason: str) -> RetryHint:
    """What could help the pod, from what it asks and what its unschedulable reason says it lacked.

    A device resource is domain-qualified (nvidia.com/gpu); cpu, memory, ephemeral-storage,
    hugepages-* and the pod count are the host's. A pod asking no device that lacked an
    extended resource counts it as the host's: a leaving pod frees it."""
    asks_devices = any("/" in name and _nonzero(text) for name, text in pending.requests.items()) or bool(
        pending.claims
    )
    lacked = _INSUFFICIENT.findall(reason)
    host = TOO_MANY_PODS in reason or any("/" not in name for name in lacked) or (bool(lacked) and not asks_devices)
    pods = pending.affinities is not None or bool(pending.topology_spread_constraints) or "affinity" in reason
    # a pod asking an extended resource (its containers carried) may be served by DRA's slices (KEP-5004)
    claims = bool(pending.claims) or bool(pending.containers)
    reported = AWAITING_REPORT in reason
    return RetryHint(
        devices=asks_devices,
        claims=claims,
        host=host,
        pods=pods,
        volumes=bool(pending.volume_claims),
        reported=reported,
    )


def _nonzero(quantity: str) -> bool:
    try:
        return parse_quantity(quantity) != 0
    except QuantityError:
        return True  # unreadable: the decision reported it; counted as asked, the safe side


def backoff_s(attempts: int) -> float:
    """kube-scheduler's backoff after `attempts` unschedulable decisions: 1 s, 2 s, 4 s, 8 s, 10 s, ..."""
    return min(MAX_BACKOFF_S, INITIAL_BACKOFF_S * 2.0 ** max(0, min(attempts, 32) - 1))


class Ticket(msgspec.Struct, frozen=True, kw_only=True):
    pending: PendingPodEvent
    state: TicketState
    decision_id: str = ""
    rejections: int = 0  # how many of our decisions for the pod the binder rejected
    origin: TraceHeaders = ()  # the pending event's trace headers: later decisions join the pod's trace
    # Parked pods only (the clock is the lot's, monotonic):
    hint: RetryHint = RetryHint()
    attempts: int = 0  # unschedulable decisions in a row: the backoff grows with them
    parked_at: float = 0.0
    backoff_until: float = 0.0
    queued: int = 0  # 0: waits for an event that could help; else its place in the retry queue


class GangTicket(msgspec.Struct, frozen=True, kw_only=True):
    """A gang this replica decided: parked (unschedulable) or awaiting its members' bindings."""

    gang: PendingGangEvent
    state: TicketState
    member_decisions: frozenset[str] = frozenset()  # decision ids of the members placed
    rejections: int = 0
    origin: TraceHeaders = ()


class ParkingLot:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._queue_order = itertools.count(1)
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

    def park(self, pending: PendingPodEvent, *, decision_id: str, origin: TraceHeaders = (), reason: str = "") -> None:
        """The pod is unschedulable (again): its backoff grows, and it waits for an event that could help."""
        before = self._tickets.get(pending.uid)
        attempts = before.attempts + 1 if before is not None and before.state is TicketState.PARKED else 1
        now = self.clock()
        self._file(pending, TicketState.PARKED, decision_id, origin)
        self._tickets[pending.uid] = msgspec.structs.replace(
            self._tickets[pending.uid],
            hint=retry_hint(pending, reason),
            attempts=attempts,
            parked_at=now,
            backoff_until=now + backoff_s(attempts),
        )

    def queue_helped(self, growth: Growth) -> int:
        """Queue every waiting parked pod the growth could help; how many were queued."""
        queued = 0
        for uid, ticket in self._tickets.items():
            if ticket.state is TicketState.PARKED and not ticket.queued and ticket.hint.helped_by(growth):
                self._tickets[uid] = msgspec.structs.replace(ticket, queued=next(self._queue_order))
                queued += 1
        return queued

    def flush_leftovers(self) -> int:
        """Queue the pods parked for longer than MAX_PARKED_S, whatever happened meanwhile."""
        horizon = self.clock() - MAX_PARKED_S
        queued = 0
        for uid, ticket in self._tickets.items():
            if ticket.state is TicketState.PARKED and not ticket.queued and ticket.parked_at <= horizon:
                self._tickets[uid] = msgspec.structs.replace(ticket, queued=next(self._queue_order))
                queued += 1
        return queued

    def take_ready(self, budget: int) -> list[Ticket]:
        """At most `budget` queued pods whose backoff has passed, to decide again now; they leave the queue."""
        now = self.clock()
        ready = [t for t in self._tickets.values() if t.queued and t.backoff_until <= now]
        ready.sort(key=lambda t: (-t.pending.priority, t.queued))
        taken = ready[:budget]
        for ticket in taken:
            self._tickets[ticket.pending.uid] = msgspec.structs.replace(ticket, queued=0)
        return taken

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
