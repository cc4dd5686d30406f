"""What the binder does with one placement message, from receipt to the reported outcome.

Order per placement: the checks that need no request (a valid placement, the
device ledger, the Node's device count, the watch's view of the pod) → ONE
pods/binding request (or report unschedulable) → BindingEvent on `bindings`.
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
from typing import Protocol

import msgspec
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
from services.binder.apply import BindResult
from services.binder.cluster_view import ClusterView
from services.binder.ledger import DeviceLedger, Holding, HoldTicket
from services.binder.node_devices import device_index_problem
from services.binder.node_fit import milli_requests
from services.binder.outcome import PodView, describe_devices, placement_problem

log = logging.getLogger(__name__)

BIND_SPAN = "binder.bind"
NO_NODE_FITS = "no node fits the pod"


class PlacementMessage(Protocol):
    """The part of a received Kafka message the handler reads (topoplace.kafka_io.Received)."""

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

    def unschedulable(self, placement: PlacementEvent, message: str) -> None: ...


class Producer(Protocol):
    async def send(self, topic: topics.Topic | str, key: str | None, event: msgspec.Struct | None) -> None: ...


class BindingSteps:
    """The steps single pods and gang members share; the handlers decide their order."""

    def __init__(
        self,
        *,
        ledger: DeviceLedger,
        binder: Binder,
        reporter: Reporter,
        cluster: ClusterView | None = None,
    ) -> None:
        self.ledger = ledger
        self.binder = binder
        self.reporter = reporter
        self.cluster = cluster

    def known_pod(self, uid: str) -> PodView | None:
        return None if self.cluster is None else self.cluster.pod(uid)

    def refusal(self, placement: PlacementEvent) -> BindResult | None:
        """Why a PLACED decision cannot be applied, found without any request; None when it may be."""
        problem = placement_problem(placement)
        if problem is not None:
            return BindResult(outcome=BindingOutcome.FAILED, reason=f"invalid placement: {problem}", attempts=0)
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
            return BindResult(outcome=BindingOutcome.CONFLICT, reason="; ".join(collisions), attempts=0)
        # A DRA placement's devices are the node's ResourceSlices', not an extended resource it advertises.
        if self.cluster is not None and self.cluster.nodes_synced and not placement.claims:
            missing = device_index_problem(
                placement.node,
                placement.devices,
                self.cluster.allocatable(placement.node),
                lambda index: self.ledger.device_vendor(placement.node, index),
            )
            if missing is not None:
                return BindResult(outcome=BindingOutcome.CONFLICT, reason=missing, attempts=0)
        if self.cluster is not None and self.cluster.nodes_synced and self.cluster.pods_synced:
            allocatable = self.cluster.allocatable(placement.node)
            if allocatable is not None:
                short = self.cluster.fit.shortfall(
                    placement.uid, placement.node, self._requests(placement), allocatable
                )
                if short is not None:
                    metrics.LEDGER_CONFLICTS.inc()
                    return BindResult(outcome=BindingOutcome.CONFLICT, reason=short, attempts=0)
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
            return BindResult(outcome=BindingOutcome.UNSCHEDULABLE, reason=placement.reason, attempts=0)
        refusal = self._steps.refusal(placement)
        if refusal is not None:
            return refusal
        return await self._steps.bind_held(placement, self._steps.known_pod(placement.uid))
