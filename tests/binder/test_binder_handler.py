"""The placement handler with stand-in parts: ledger bookkeeping, failures, metrics, ordering."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from binder_support import RecordingProducer
from opentelemetry import context as otel_context
from prometheus_client import REGISTRY

from schemas.events import BindingEvent, BindingOutcome, DeviceAssignment, PlacementEvent, PlacementOutcome
from services.binder.apply import BindResult
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.ledger import DeviceLedger, Holding
from services.binder.outcome import PodView

NODE = "n1"


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


class ScriptedBinder:
    def __init__(self, answer: BindResult | BaseException | None = None, *, block: bool = False) -> None:
        self.answer = answer
        self.calls: list[PlacementEvent] = []
        self.entered = asyncio.Event()
        self._block = block

    async def current_pod(self, namespace: str, name: str) -> PodView | None:
        return None

    async def bind(self, placement: PlacementEvent, known: PodView | None = None) -> BindResult:
        self.calls.append(placement)
        self.entered.set()
        if self._block:
            await asyncio.Event().wait()
        if isinstance(self.answer, BaseException):
            raise self.answer
        assert self.answer is not None
        return self.answer


class RecordedEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str]] = []

    def scheduled(self, placement: PlacementEvent) -> None:
        self.recorded.append(("Scheduled", ""))

    def failed_scheduling(self, placement: PlacementEvent, message: str) -> None:
        self.recorded.append(("FailedScheduling", message))

    def unschedulable(self, placement: PlacementEvent, message: str) -> None:
        self.recorded.append(("Unschedulable", message))


def placement(uid: str = "u1", devices: tuple[DeviceAssignment, ...] = (DeviceAssignment(index=0),)) -> PlacementEvent:
    return PlacementEvent(
        decision_id="d1",
        uid=uid,
        namespace="ns",
        name=uid,
        pod_resource_version="1",
        outcome=PlacementOutcome.PLACED,
        node=NODE,
        devices=devices,
    )


def build(
    binder: ScriptedBinder, ledger: DeviceLedger | None = None, producer: Any = None
) -> tuple[PlacementHandler, DeviceLedger, RecordingProducer, RecordedEvents]:
    ledger = ledger or DeviceLedger()
    producer = producer or RecordingProducer()
    events = RecordedEvents()
    steps = BindingSteps(ledger=ledger, binder=binder, reporter=events)
    handler = PlacementHandler(steps=steps, producer=producer)
    return handler, ledger, producer, events


def binds_counted(outcome: BindingOutcome) -> float:
    return REGISTRY.get_sample_value("topoplace_binder_binds_total", {"outcome": outcome.value}) or 0.0


async def test_bound_keeps_the_holding_and_counts_it() -> None:
    handler, ledger, producer, events = build(ScriptedBinder(BindResult(outcome=BindingOutcome.BOUND, bound_now=True)))
    before = binds_counted(BindingOutcome.BOUND)
    await handler(Message(event=placement()))
    assert ledger.holding("u1") == Holding(pod_uid="u1", node=NODE, devices=(DeviceAssignment(index=0),))
    assert events.recorded == [("Scheduled", "")]
    (sent,) = producer.sent
    assert isinstance(sent.event, BindingEvent) and sent.event.outcome is BindingOutcome.BOUND
    assert binds_counted(BindingOutcome.BOUND) == before + 1


async def test_already_bound_pod_gets_no_second_scheduled_event() -> None:
    handler, _, producer, events = build(ScriptedBinder(BindResult(outcome=BindingOutcome.BOUND, bound_now=False)))
    await handler(Message(event=placement()))
    assert events.recorded == []
    assert producer.sent[0].event.outcome is BindingOutcome.BOUND


@pytest.mark.parametrize("outcome", [BindingOutcome.CONFLICT, BindingOutcome.FAILED])
async def test_a_bind_that_did_not_happen_puts_the_ledger_back(outcome: BindingOutcome) -> None:
    ledger = DeviceLedger()
    earlier = Holding(pod_uid="u1", node=NODE, devices=(DeviceAssignment(index=5),))
    ledger.hold(earlier)
    handler, _, producer, events = build(ScriptedBinder(BindResult(outcome=outcome, reason="because")), ledger)
    await handler(Message(event=placement()))
    assert ledger.holding("u1") == earlier
    assert ledger.holders(NODE, 0) == {}
    assert producer.sent[0].event.outcome is outcome
    assert events.recorded[0][0] == "FailedScheduling" and "because" in events.recorded[0][1]


async def test_unexpected_error_is_reported_as_failed() -> None:
    handler, ledger, producer, _ = build(ScriptedBinder(RuntimeError("surprise")))
    await handler(Message(event=placement()))
    (sent,) = producer.sent
    assert sent.event.outcome is BindingOutcome.FAILED and "surprise" in sent.event.reason
    assert ledger.holding("u1") is None


async def test_cancelled_bind_holds_nothing_and_reports_nothing() -> None:
    binder = ScriptedBinder(block=True)
    handler, ledger, producer, _ = build(binder)
    task = asyncio.create_task(handler(Message(event=placement())))
    await asyncio.wait_for(binder.entered.wait(), 5)
    assert ledger.holding("u1") is not None  # held while the bind runs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ledger.holding("u1") is None
    assert producer.sent == []


async def test_a_failed_send_propagates_so_the_offset_is_not_committed() -> None:
    async def broker_down() -> None:
        raise ConnectionError("broker down")

    handler, _, _, _ = build(
        ScriptedBinder(BindResult(outcome=BindingOutcome.BOUND, bound_now=True)),
        producer=RecordingProducer(on_send=broker_down),
    )
    with pytest.raises(ConnectionError):
        await handler(Message(event=placement()))


async def test_ledger_conflict_never_calls_the_api() -> None:
    ledger = DeviceLedger()
    ledger.hold(Holding(pod_uid="other", node=NODE, devices=(DeviceAssignment(index=0),)))
    binder = ScriptedBinder(BindResult(outcome=BindingOutcome.BOUND))
    handler, _, producer, _ = build(binder, ledger)
    await handler(Message(event=placement()))
    assert binder.calls == []
    assert producer.sent[0].event.outcome is BindingOutcome.CONFLICT
    assert producer.sent[0].event.attempts == 0


async def test_a_stale_placement_of_a_bound_pod_never_frees_what_the_pod_holds() -> None:
    # u1 is bound on n1 with a quarter of GPU 3. A stale placement sends it to another GPU: it is refused
    # at once, with no request, and GPU 3 stays held all along, so a pod asking for the rest of it
    # finds only what is really free. (Held for the bind, the stale placement freed GPU 3 while its
    # bind retried, and a third pod was bound onto it: 125 cores of 100.)
    ledger = DeviceLedger()
    quarter = DeviceAssignment(index=3, memory_mib=1000, cores=25)
    ledger.record_bound(Holding(pod_uid="u1", node=NODE, devices=(quarter,)))
    held_during_bind: list[dict[str, DeviceAssignment]] = []

    class ServerSaysBoundElsewhere(ScriptedBinder):
        async def bind(self, placement: PlacementEvent, known: PodView | None = None) -> BindResult:
            held_during_bind.append(ledger.holders(NODE, 3))
            return await super().bind(placement, known)

    binder = ServerSaysBoundElsewhere(BindResult(outcome=BindingOutcome.CONFLICT, reason="bound elsewhere"))
    handler, _, producer, _ = build(binder, ledger)
    stale = placement(devices=(DeviceAssignment(index=6, memory_mib=1000, cores=25),))
    await handler(Message(event=stale))
    assert held_during_bind == []  # no bind at all, so no moment with GPU 3 free
    assert binder.calls == []
    (sent,) = producer.sent
    assert sent.event.outcome is BindingOutcome.CONFLICT
    assert sent.event.reason == "pod ns/u1 is already bound to node n1 with devices 3 (1000 MiB, 25 cores)"
    assert ledger.holders(NODE, 3) == {"u1": quarter}
    assert ledger.collisions("u2", NODE, (DeviceAssignment(index=3, memory_mib=1000, cores=80),))


async def test_the_same_placement_of_a_bound_pod_still_goes_to_the_server() -> None:
    # Re-delivered: the server's answer (already bound here) settles it, as before.
    ledger = DeviceLedger()
    ledger.record_bound(Holding(pod_uid="u1", node=NODE, devices=(DeviceAssignment(index=0),)))
    binder = ScriptedBinder(BindResult(outcome=BindingOutcome.BOUND, reason="already bound"))
    handler, _, producer, _ = build(binder, ledger)
    await handler(Message(event=placement()))
    assert len(binder.calls) == 1
    assert producer.sent[0].event.outcome is BindingOutcome.BOUND
