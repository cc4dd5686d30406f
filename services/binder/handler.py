"""What the binder does with one placement message, from receipt to the reported outcome.

Order per placement: re-check the device ledger → annotate + bind (or report
unschedulable) → Event on the pod → BindingEvent on `bindings`. The consumer
commits the placement's offset only after this returns, i.e. after the
outcome is durably produced; a crash before that re-delivers the placement,
which is harmless (a pod already bound to the node is a success).
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
from services.binder.ledger import DeviceLedger, Holding
from services.binder.outcome import describe_devices, placement_problem

log = logging.getLogger(__name__)

BIND_SPAN = "binder.bind"


class PlacementMessage(Protocol):
    """The part of a received Kafka message the handler reads (topoplace.kafka_io.Received)."""

    @property
    def event(self) -> Event | None: ...

    @property
    def trace_context(self) -> otel_context.Context: ...


class Binder(Protocol):
    async def bind(self, placement: PlacementEvent) -> BindResult: ...


class SchedulingEvents(Protocol):
    async def scheduled(self, placement: PlacementEvent) -> bool: ...

    async def failed_scheduling(self, placement: PlacementEvent, message: str) -> bool: ...


class Producer(Protocol):
    async def send(self, topic: topics.Topic | str, key: str | None, event: msgspec.Struct | None) -> None: ...


class PlacementHandler:
    def __init__(
        self,
        *,
        ledger: DeviceLedger,
        binder: Binder,
        events: SchedulingEvents,
        producer: Producer,
        tracer: trace.Tracer | None = None,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ledger = ledger
        self._binder = binder
        self._events = events
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
            span.set_attribute("outcome", result.outcome.value)
            span.set_attribute("attempts", result.attempts)
            if result.reason:
                span.set_attribute("reason", result.reason)
            if result.resource_version_changed:
                span.set_attribute("pod.resource_version_changed", True)
            if result.outcome is BindingOutcome.FAILED:
                span.set_status(trace.Status(trace.StatusCode.ERROR, result.reason))
            # Produced inside the span, so the outcome message carries this trace onwards.
            await self._producer.send(topics.BINDINGS, placement.uid, self._binding_event(placement, result))
        metrics.BINDS.labels(outcome=result.outcome.value).inc()
        metrics.BIND_SECONDS.observe(self._monotonic() - started)
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

    async def _settle_alone(self, placement: PlacementEvent) -> BindResult:
        lock = self._pod_locks.setdefault(placement.uid, asyncio.Lock())
        try:
            async with lock:  # uncontended, this does not yield: the ledger check keeps its order
                return await self._settle(placement)
        finally:
            if not lock.locked() and self._pod_locks.get(placement.uid) is lock:
                del self._pod_locks[placement.uid]

    async def _settle(self, placement: PlacementEvent) -> BindResult:
        """Decide and apply; reports every way it can end as a BindResult."""
        problem = placement_problem(placement)
        if problem is not None:
            result = BindResult(outcome=BindingOutcome.FAILED, reason=f"invalid placement: {problem}", attempts=0)
            await self._events.failed_scheduling(placement, result.reason)
            return result
        if placement.outcome is PlacementOutcome.UNSCHEDULABLE:
            await self._events.failed_scheduling(placement, placement.reason or "no node fits the pod")
            return BindResult(outcome=BindingOutcome.UNSCHEDULABLE, reason=placement.reason, attempts=0)

        collisions = self._ledger.collisions(placement.uid, placement.node, placement.devices)
        if collisions:
            metrics.LEDGER_CONFLICTS.inc()
            result = BindResult(outcome=BindingOutcome.CONFLICT, reason="; ".join(collisions), attempts=0)
            await self._events.failed_scheduling(placement, f"Binding to {placement.node} rejected: {result.reason}")
            return result

        # Held before the API calls so nothing else can be granted these shares meanwhile;
        # put back as it was unless the pod ends up bound here.
        previous = self._ledger.hold(Holding(pod_uid=placement.uid, node=placement.node, devices=placement.devices))
        try:
            result = await self._binder.bind(placement)
        except Exception as exc:  # a bug or an unforeseen answer: still reported, never silently lost
            log.exception("binder.bind_error", extra={"fields": {"uid": placement.uid}})
            result = BindResult(outcome=BindingOutcome.FAILED, reason=f"unexpected error: {exc!r}")
        except BaseException:  # cancelled mid-bind: the placement comes again, hold nothing meanwhile
            self._ledger.restore(placement.uid, previous)
            raise
        if result.outcome is not BindingOutcome.BOUND:
            self._ledger.restore(placement.uid, previous)
        metrics.LEDGER_PODS.set(self._ledger.pod_count())
        if result.outcome is not BindingOutcome.BOUND:
            verb = "rejected" if result.outcome is BindingOutcome.CONFLICT else "failed"
            await self._events.failed_scheduling(placement, f"Binding to {placement.node} {verb}: {result.reason}")
        elif result.bound_now:
            await self._events.scheduled(placement)
        return result

    def _binding_event(self, placement: PlacementEvent, result: BindResult) -> BindingEvent:
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
            finished_at=self._wall_clock(),
        )
