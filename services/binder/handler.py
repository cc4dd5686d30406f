"""What the binder does with one placement message, from receipt to the reported outcome.

Order per placement: the pod as the binder's own watch has it (asked of the
server when the watch has not seen it yet) → the checks that need no request
(a valid placement; the pod is the placement's and ours; the node exists, is
Ready and passes the node filters; each device's index and UUID are the
node's; the device ledger; the Node's device count; its resources:
placement_checks.py) → ONE pods/binding request (or report unschedulable) →
BindingEvent on `bindings`. A refused placement writes nothing to the API
server; it is reported with its reason and counted by rule.
Events and conditions go out in the background (`reporting.PodReporter`).
The consumer commits the placement's offset only after this returns, i.e.
after the outcome is durably produced; a crash before that re-delivers the
placement, which is harmless (a pod already bound to the node is a success).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Protocol

import msgspec
from kubernetes_asyncio.client.exceptions import ApiException
from opentelemetry import context as otel_context
from opentelemetry import trace

from schemas import topics
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    Event,
    PlacementEvent,
    PlacementOutcome,
)
from services.binder import metrics
from services.binder.apply import BindResult, api_error_text
from services.binder.cluster_view import ClusterView
from services.binder.ledger import DeviceLedger, Holding, HoldTicket
from services.binder.node_devices import device_index_problem
from services.binder.node_fit import milli_requests
from services.binder.outcome import PodView, describe_devices, placement_problem
from services.binder.placement_checks import (
    Refusal,
    RefusalKind,
    device_refusal,
    node_refusal,
    pod_refusal,
)
from services.binder.pod_reader import PodReader, PodRecord
from services.binder.preemption import PreemptionExecutor
from services.binder.reservations import HeldRoom
from services.binder.retry import RetriesExhausted

log = logging.getLogger(__name__)

BIND_SPAN = "binder.bind"
NO_NODE_FITS = "no node fits the pod"


class PlacementMessage(Protocol):
    """The part of a received Kafka message the handler reads (topoplace.kafka.records.Received)."""

    @property
    def event(self) -> Event | None: ...

    @property
    def trace_context(self) -> otel_context.Context: ...


class Binder(Protocol):
    async def bind(self, placement: PlacementEvent, known: PodView | None = None) -> BindResult: ...

    async def current_pod(self, namespace: str, name: str) -> PodView | None: ...


class Reporter(Protocol):
    """services.binder.reporting.PodReporter: writes that never hold up a binding."""

    def scheduled(self, placement: PlacementEvent) -> None: ...

    def failed_scheduling(self, placement: PlacementEvent, message: str) -> None: ...

    def unschedulable(self, placement: PlacementEvent, message: str, reason: str = "") -> None: ...


class Producer(Protocol):
    async def send(self, topic: topics.Topic | str, key: str | None, event: msgspec.Struct | None) -> None: ...


class PodAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """What the checks know of a placement's pod: its record (None: there is no such pod), or why
    it is not known (`unknown`: not seen by the watch and not read)."""

    record: PodRecord | None = None
    unknown: str | None = None


def refused(refusal: Refusal) -> BindResult:
    metrics.REFUSALS.labels(kind=refusal.kind.value).inc()
    return BindResult(outcome=refusal.outcome, reason=refusal.reason, attempts=0)


class BindingSteps:
    """The steps single pods and gang members share; the handlers decide their order.

    `cluster`: the binder's API watch, which every placement is checked against (the
    service always has one; the handler's unit tests of bookkeeping run without).
    `reader`: asks the server for a pod the watch has not seen yet; without one such a
    placement is refused as not seen (the placer plans it again)."""

    def __init__(
        self,
        *,
        ledger: DeviceLedger,
        binder: Binder,
        reporter: Reporter,
        cluster: ClusterView | None = None,
        reader: PodReader | None = None,
        preemption: PreemptionExecutor | None = None,
        held: HeldRoom | None = None,
    ) -> None:
        self.ledger = ledger
        self.binder = binder
        self.reporter = reporter
        self.cluster = cluster
        self.reader = reader
        self.preemption, self.held = preemption, held  # carries out preemptions; the room held for them

    def known_pod(self, uid: str) -> PodView | None:
        return None if self.cluster is None else self.cluster.pod(uid)

    def _watched_pod(self, uid: str) -> PodAnswer:
        assert self.cluster is not None
        view, name = self.cluster.pod(uid), self.cluster.pod_name(uid)
        if view is None or name is None:
            return PodAnswer(unknown=f"pod uid {uid} is not seen by the binder's watch yet")
        return PodAnswer(record=PodRecord(view=view, name=name, rules=self.cluster.placement_rules(uid)))

    async def look_up_pod(self, placement: PlacementEvent) -> PodAnswer | None:
        """The pod as the watch has it, else as the server has it now (the watch may lag behind a
        pod just created). None without a watch. Awaits only when the watch has not seen the pod."""
        if self.cluster is None:
            return None
        answer = self._watched_pod(placement.uid)
        if answer.record is not None or self.reader is None:
            return answer
        try:
            return PodAnswer(record=await self.reader.read(placement.namespace, placement.name))
        except (ApiException, RetriesExhausted) as exc:
            error = api_error_text(exc) if isinstance(exc, ApiException) else str(exc)
            return PodAnswer(unknown=f"cannot read pod {placement.namespace}/{placement.name}: {error}")

    def cluster_refusal(self, placement: PlacementEvent, answer: PodAnswer | None) -> Refusal | None:
        """The pod, its node and its devices as the API server and the topology have them."""
        cluster = self.cluster
        if cluster is None:
            return None
        answer = answer or self._watched_pod(placement.uid)
        if answer.unknown is not None:
            return Refusal(kind=RefusalKind.NOT_SEEN, outcome=BindingOutcome.CONFLICT, reason=answer.unknown)
        record = answer.record
        view, name = (record.view, record.name) if record is not None else (None, None)
        refusal = pod_refusal(placement, view, name, cluster.scheduler_name)
        if refusal is not None or record is None or record.view.node_name or record.view.terminating:
            return refusal  # a bound or terminating pod of ours is settled by outcome.judge_pod
        if not cluster.nodes_synced:
            why = "the binder's watch has not listed the nodes yet"
            return Refusal(kind=RefusalKind.NOT_SEEN, outcome=BindingOutcome.CONFLICT, reason=why)
        refusal = node_refusal(placement, record.rules, cluster.node_rules(placement.node))
        if refusal is None and not placement.claims:  # a DRA device is its ResourceSlice's (claims.py)
            refusal = device_refusal(placement, self.ledger.device_uuids(placement.node))
        return refusal

    def refusal(self, placement: PlacementEvent, answer: PodAnswer | None = None) -> BindResult | None:
        """Why a PLACED decision cannot be applied, found without any request; None when it may be.

        `answer`: the pod from `look_up_pod`; without one, the watch's view is all there is."""
        problem = placement_problem(placement)
        if problem is not None:
            return BindResult(outcome=BindingOutcome.FAILED, reason=f"invalid placement: {problem}", attempts=0)
        cluster_refusal = self.cluster_refusal(placement, answer)
        if cluster_refusal is not None:
            return refused(cluster_refusal)
        elsewhere = self.ledger.bound_elsewhere(placement.uid, placement.node, placement.devices)
        if elsewhere is not None:
            # A stale placement of a bound pod: holding its devices for the bind would free the devices
            # it really holds while the bind is in flight (and retries can keep it in flight long).
            where = f"node {elsewhere.node} with devices {describe_devices(elsewhere.devices)}"
            reason = f"pod {placement.namespace}/{placement.name} is already bound to {where}"
            return BindResult(outcome=BindingOutcome.CONFLICT, reason=reason, attempts=0)
        collisions = self.ledger.collisions(placement.uid, placement.node, placement.devices)
        if collisions:
            metrics.LEDGER_CONFLICTS.inc()
            why = "; ".join(collisions)
            return refused(Refusal(kind=RefusalKind.LEDGER, outcome=BindingOutcome.CONFLICT, reason=why))
        held = self.held.refusal(placement, self.ledger) if self.held is not None else None
        if held is not None:
            return refused(Refusal(kind=RefusalKind.LEDGER, outcome=BindingOutcome.CONFLICT, reason=held))
        # A DRA placement's devices are the node's ResourceSlices', not an extended resource it advertises.
        if self.cluster is not None and self.cluster.nodes_synced and not placement.claims:
            asked = [name for name, amount in self._requests(placement).items() if amount > 0]
            device_of = partial(self.ledger.device_capacity, placement.node)
            missing = device_index_problem(
                placement.node, placement.devices, self.cluster.allocatable(placement.node), device_of, asked
            )
            if missing is not None:
                return refused(Refusal(kind=RefusalKind.DEVICE_COUNT, outcome=BindingOutcome.CONFLICT, reason=missing))
        if self.cluster is not None and self.cluster.nodes_synced and self.cluster.pods_synced:
            allocatable = self.cluster.allocatable(placement.node)
            if allocatable is not None:
                short = self.cluster.fit.shortfall(
                    placement.uid, placement.node, self._requests(placement), allocatable
                )
                if short is not None:
                    metrics.LEDGER_CONFLICTS.inc()
                    return refused(Refusal(kind=RefusalKind.RESOURCES, outcome=BindingOutcome.CONFLICT, reason=short))
        return None

    def _requests(self, placement: PlacementEvent) -> dict[str, int]:
        """What the pod requests: the API server's pod when the watch has it, else the placement's copy."""
        known = self.known_pod(placement.uid)
        return dict(known.requests) if known is not None else milli_requests(placement.requests)

    def hold(self, placement: PlacementEvent) -> HoldTicket:
        """Take the placement's devices (and node resources) before the request, so nothing else is
        granted them meanwhile."""
        if self.cluster is not None:
            self.cluster.fit.assume(placement.uid, placement.node, self._requests(placement))
        return self.ledger.hold(Holding(pod_uid=placement.uid, node=placement.node, devices=placement.devices))

    def put_back(self, placement: PlacementEvent, ticket: HoldTicket) -> None:
        """Undo `hold`: the pod holds what it held before, and nothing of the node's resources."""
        self.ledger.restore(ticket)
        if self.cluster is not None:
            self.cluster.fit.forget_assumed(placement.uid)

    def settle_hold(self, placement: PlacementEvent, ticket: HoldTicket, result: BindResult) -> None:
        """Keep the hold as the pod's binding, or put back what the pod held before."""
        if result.outcome is BindingOutcome.BOUND:
            self.ledger.mark_bound(ticket)
            if self.held is not None:
                self.held.reservations.bound(placement.uid)
            if self.cluster is not None:
                self.cluster.fit.settled_bound(placement.uid)
        else:
            self.put_back(placement, ticket)
        metrics.LEDGER_PODS.set(self.ledger.pod_count())

    async def bind_held(self, placement: PlacementEvent, known: PodView | None) -> BindResult:
        """Hold, bind, settle the hold: the ledger never keeps devices of a pod not bound."""
        ticket = self.hold(placement)
        try:
            result = await self.binder.bind(placement, known)
        except Exception as exc:  # a bug or an unforeseen answer: still reported, never silently lost
            log.exception("binder.bind_error", extra={"fields": {"uid": placement.uid}})
            result = BindResult(outcome=BindingOutcome.FAILED, reason=f"unexpected error: {exc!r}")
        except BaseException:  # cancelled mid-bind: the placement comes again, hold nothing meanwhile
            self.put_back(placement, ticket)
            raise
        self.settle_hold(placement, ticket, result)
        return result

    def tell_pod(self, placement: PlacementEvent, result: BindResult) -> None:
        """The Event (and condition) a result calls for, in the background."""
        if result.outcome is BindingOutcome.UNSCHEDULABLE:
            self.reporter.unschedulable(placement, result.reason or NO_NODE_FITS)
        elif result.condition:  # a PreBind step failed (volumes not bound in time): kube's condition and Event
            self.reporter.unschedulable(placement, result.reason, result.condition)
        elif result.outcome is BindingOutcome.BOUND:
            if result.bound_now:
                self.reporter.scheduled(placement)
        elif result.reason.startswith("invalid placement:"):
            self.reporter.failed_scheduling(placement, result.reason)
        else:
            verb = "rejected" if result.outcome is BindingOutcome.CONFLICT else "failed"
            self.reporter.failed_scheduling(placement, f"Binding to {placement.node} {verb}: {result.reason}")


def binding_event(placement: PlacementEvent, result: BindResult, finished_at: float) -> BindingEvent:
    return BindingEvent(
        decision_id=placement.decision_id,
        uid=placement.uid,
        namespace=placement.namespace,
        name=placement.name,
        outcome=result.outcome,
        node=placement.node,
        devices=placement.devices,
        reason=result.reason,
        attempts=result.attempts,
        finished_at=finished_at,
    )


def record_outcome(placement: PlacementEvent, result: BindResult, seconds: float) -> None:
    metrics.BINDS.labels(outcome=result.outcome.value).inc()
    metrics.BIND_SECONDS.observe(seconds)
    log.info(
        "binder.outcome",
        extra={
            "fields": {
                "pod": f"{placement.namespace}/{placement.name}",
                "uid": placement.uid,
                "node": placement.node,
                "outcome": result.outcome.value,
                "attempts": result.attempts,
                "reason": result.reason,
            }
        },
    )


def mark_span(span: trace.Span, result: BindResult) -> None:
    span.set_attribute("outcome", result.outcome.value)
    span.set_attribute("attempts", result.attempts)
    if result.reason:
        span.set_attribute("reason", result.reason)
    if result.resource_version_changed:
        span.set_attribute("pod.resource_version_changed", True)
    if result.outcome is BindingOutcome.FAILED:
        span.set_status(trace.Status(trace.StatusCode.ERROR, result.reason))


class PlacementHandler:
    def __init__(
        self,
        *,
        steps: BindingSteps,
        producer: Producer,
        tracer: trace.Tracer | None = None,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._steps = steps
        self._producer = producer
        self._tracer = tracer or trace.get_tracer("topoplace.binder")
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        # Placements of one pod are settled one at a time: copies of a placement may be in flight
        # together (at-least-once delivery, concurrent windows), and a copy's ledger hold must not
        # become what another copy restores when its bind fails.
        self._pod_locks: dict[str, asyncio.Lock] = {}

    async def __call__(self, message: PlacementMessage) -> None:
        placement = message.event
        if not isinstance(placement, PlacementEvent):
            # The consumer sends this message to the DLQ with our reason.
            raise TypeError(f"value: expected a PlacementEvent, got {type(placement).__name__}")
        started = self._monotonic()
        with self._tracer.start_as_current_span(
            BIND_SPAN,
            context=message.trace_context,
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "pod": f"{placement.namespace}/{placement.name}",
                "pod.uid": placement.uid,
                "node": placement.node,
                "devices": describe_devices(placement.devices),
                "decision_id": placement.decision_id,
            },
        ) as span:
            result = await self._settle_alone(placement)
            mark_span(span, result)
            # Produced inside the span, so the outcome message carries this trace onwards.
            await self._producer.send(
                topics.BINDINGS, placement.uid, binding_event(placement, result, self._wall_clock())
            )
        record_outcome(placement, result, self._monotonic() - started)

    async def _settle_alone(self, placement: PlacementEvent) -> BindResult:
        lock = self._pod_locks.setdefault(placement.uid, asyncio.Lock())
        try:
            async with lock:  # uncontended, this does not yield: the ledger check keeps its order
                result = await self._settle(placement)
        finally:
            if not lock.locked() and self._pod_locks.get(placement.uid) is lock:
                del self._pod_locks[placement.uid]
        self._steps.tell_pod(placement, result)
        return result

    async def _settle(self, placement: PlacementEvent) -> BindResult:
        """Decide and apply; reports every way it can end as a BindResult."""
        problem = placement_problem(placement)
        if problem is not None:
            return BindResult(outcome=BindingOutcome.FAILED, reason=f"invalid placement: {problem}", attempts=0)
        if placement.outcome is PlacementOutcome.UNSCHEDULABLE:
            if placement.nominated_node and self._steps.preemption is not None:
                return await self._steps.preemption.carry_out(placement)
            return BindResult(outcome=BindingOutcome.UNSCHEDULABLE, reason=placement.reason, attempts=0)
        # Asked before the synchronous checks and the hold, which must not be parted by an await.
        answer = await self._steps.look_up_pod(placement)
        refusal = self._steps.refusal(placement, answer)
        if refusal is not None:
            return refusal
        record = answer.record if answer is not None else None
        known = record.view if record is not None else self._steps.known_pod(placement.uid)
        return await self._steps.bind_held(placement, known)
