"""One pod's placements in flight together (a single one and its gang's): the binding is never dropped."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import context as otel_context

from schemas.events import (
    BindingOutcome,
    DeviceAssignment,
    GangPlacementEvent,
    PlacementEvent,
    PlacementOutcome,
)
from services.binder.apply import BindResult
from services.binder.gang import GangHandler
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.ledger import DeviceLedger, Holding, HoldTicket
from services.binder.outcome import PodView

NODE = "n1"


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


class Silent:
    def scheduled(self, placement: PlacementEvent) -> None:
        pass

    def failed_scheduling(self, placement: PlacementEvent, message: str) -> None:
        pass

    def unschedulable(self, placement: PlacementEvent, message: str) -> None:
        pass


class Discard:
    async def send(self, topic: object, key: str | None, event: msgspec.Struct | None) -> None:
        pass


class SteppedBinder:
    """Binds every pod; reading a pod waits until the test lets it go (`gone`: read as deleted)."""

    def __init__(self, gone: set[str]) -> None:
        self.gone = gone
        self.reading = asyncio.Event()
        self.go_on = asyncio.Event()

    async def current_pod(self, namespace: str, name: str) -> PodView | None:
        self.reading.set()
        await self.go_on.wait()
        return None if name in self.gone else PodView(uid=name)

    async def bind(self, placement: PlacementEvent, known: PodView | None = None) -> BindResult:
        return BindResult(outcome=BindingOutcome.BOUND, bound_now=True)


def placement(uid: str, *indices: int) -> PlacementEvent:
    return PlacementEvent(
        decision_id=f"d-{uid}",
        uid=uid,
        namespace="ns",
        name=uid,
        pod_resource_version="1",
        outcome=PlacementOutcome.PLACED,
        node=NODE,
        devices=tuple(DeviceAssignment(index=i) for i in indices),
    )


async def test_a_gang_put_back_after_the_single_placement_bound_keeps_the_binding() -> None:
    """The gang holds the pod's devices, its single placement binds meanwhile, then a gang-mate fails."""
    ledger = DeviceLedger()
    binder = SteppedBinder(gone={"mate"})
    steps = BindingSteps(ledger=ledger, binder=binder, reporter=Silent())
    gangs = GangHandler(steps=steps, producer=Discard())
    singles = PlacementHandler(steps=steps, producer=Discard())
    gang = GangPlacementEvent(
        decision_id="g-1",
        name="ns/train",
        namespace="ns",
        outcome=PlacementOutcome.PLACED,
        members=(placement("p", 0), placement("mate", 1)),
    )

    gang_task = asyncio.create_task(gangs(Message(event=gang)))
    await binder.reading.wait()  # the gang holds p's devices and reads its first member
    await singles(Message(event=placement("p", 0)))
    assert ledger.is_bound("p")
    binder.go_on.set()  # the gang-mate turns out deleted: nothing of the gang is bound, its holds go back
    await gang_task

    assert ledger.is_bound("p")
    assert ledger.holding("p") == Holding(pod_uid="p", node=NODE, devices=(DeviceAssignment(index=0),))
    assert set(ledger.holders(NODE, 0)) == {"p"}
    assert ledger.holders(NODE, 1) == {}
    assert ledger.collisions("other", NODE, (DeviceAssignment(index=0),)) != ()


def test_a_failed_placement_of_a_bound_pod_leaves_its_binding() -> None:
    ledger = DeviceLedger()
    ledger.record_bound(Holding(pod_uid="p", node=NODE, devices=(DeviceAssignment(index=0),)))
    gang_hold = ledger.hold(Holding(pod_uid="p", node=NODE, devices=(DeviceAssignment(index=0),)))
    single_hold = ledger.hold(Holding(pod_uid="p", node=NODE, devices=(DeviceAssignment(index=0),)))
    ledger.restore(gang_hold)
    ledger.restore(single_hold)
    assert ledger.is_bound("p") and set(ledger.holders(NODE, 0)) == {"p"}


# --- any interleaving, one pod ------------------------------------------------------------------

DEVICE_SETS = [(0,), (1,), (0, 1), (2,)]

operation = st.one_of(
    st.tuples(st.just("hold"), st.sampled_from(range(len(DEVICE_SETS)))),
    st.tuples(st.just("bound"), st.integers(min_value=0, max_value=7)),  # the nth open hold's bind succeeded
    st.tuples(st.just("failed"), st.integers(min_value=0, max_value=7)),  # the nth open hold's bind failed
    st.tuples(st.just("reported"), st.sampled_from(range(len(DEVICE_SETS)))),  # the API watch saw it bound
)


def devices_of(choice: int) -> tuple[DeviceAssignment, ...]:
    return tuple(DeviceAssignment(index=i) for i in DEVICE_SETS[choice])


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=30))
def test_any_interleaving_of_holds_never_leaves_a_bound_pod_without_its_devices(
    operations: list[tuple[str, int]],
) -> None:
    ledger = DeviceLedger()
    open_holds: list[tuple[HoldTicket, int]] = []
    bound_with: int | None = None  # what the cluster says the pod was bound with: the first binding wins
    for kind, value in operations:
        if kind == "hold":
            open_holds.append((ledger.hold(Holding(pod_uid="p", node=NODE, devices=devices_of(value))), value))
        elif kind == "reported":
            if bound_with is None:
                bound_with = value
            ledger.record_bound(Holding(pod_uid="p", node=NODE, devices=devices_of(bound_with)))
        elif open_holds:
            ticket, choice = open_holds.pop(value % len(open_holds))
            if kind == "bound" and (bound_with is None or bound_with == choice):
                bound_with = choice
                ledger.mark_bound(ticket)
            else:  # a bind that failed, or found the pod bound with other devices
                ledger.restore(ticket)
        if bound_with is not None:
            assert ledger.is_bound("p")
            for index in DEVICE_SETS[bound_with]:
                assert "p" in ledger.holders(NODE, index), (operations, bound_with)
    for ticket, _ in open_holds:
        ledger.restore(ticket)
    held = {i for i in range(3) if ledger.holders(NODE, i)}
    assert held == (set(DEVICE_SETS[bound_with]) if bound_with is not None else set())
