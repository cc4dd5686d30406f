"""A decision still on its way through the binder is not sent again for every repeat of its pod's
pending event (a relist, a redelivery); past the resend window it is, the same decision."""

from __future__ import annotations

from typing import Any, cast

import msgspec
from opentelemetry.context import Context
from placer_builders import first_fit, pending, status, topology
from scripted_engine import ScriptedEngine

from schemas import topics
from schemas.events import PlacementEvent
from services.placer.service import PlacerService, RecentlySent
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sends:
    def __init__(self) -> None:
        self.sent: list[tuple[str, msgspec.Struct | None]] = []

    async def send(self, topic: Any, key: str | None, event: msgspec.Struct | None) -> None:
        self.sent.append((getattr(topic, "name", topic), event))


def received(event: Any) -> Received:
    return Received(
        topic=topics.PODS_PENDING.name,
        partition=0,
        offset=0,
        key=None,
        event=event,
        trace_context=Context(),
        timestamp_ms=0,
    )


def placer_on_one_node(gpus: int) -> tuple[PlacerService, Sends, Clock]:
    """A placer whose sends are recorded and whose resend window runs on a clock the test moves."""
    sends = Sends()
    service = PlacerService(cast(EventProducer, sends), engine=ScriptedEngine(first_fit))
    clock = Clock()
    service.sent = RecentlySent(30.0, clock)
    service.decider.on_event(topology("n1", gpus))
    service.decider.on_event(status("n1"))
    return service, sends, clock


def test_recently_sent_forgets_after_the_window() -> None:
    clock = Clock()
    sent = RecentlySent(30.0, clock)
    sent.sent("d1")
    clock.now += 29.0
    assert sent.recent("d1") and not sent.recent("d2")
    sent.sent("d2")
    clock.now += 2.0
    assert not sent.recent("d1") and sent.recent("d2")  # d1 is 31 s old
    assert len(sent) == 1  # what is past the window is dropped, not kept


async def test_a_repeat_inside_the_window_sends_nothing_and_after_it_the_same_decision() -> None:
    service, sends, clock = placer_on_one_node(gpus=2)
    pod = pending("p1")
    await service.on_pending(received(pod))
    await service.on_pending(received(pod))  # the relist 10 s later, say
    assert len(sends.sent) == 1
    clock.now += 31.0
    await service.on_pending(received(pod))
    first, again = (event for _, event in sends.sent)
    assert isinstance(first, PlacementEvent) and again == first


async def test_an_unschedulable_pod_told_the_same_reason_is_not_told_again_inside_the_window() -> None:
    service, sends, clock = placer_on_one_node(gpus=1)
    too_big = pending("big", 2)
    await service.on_pending(received(too_big))
    # A relist brings it again under a new resourceVersion: a new decision id, the same answer.
    await service.on_pending(received(msgspec.structs.replace(too_big, resource_version="2")))
    assert len(sends.sent) == 1
    clock.now += 31.0
    await service.on_pending(received(msgspec.structs.replace(too_big, resource_version="3")))
    first, again = (event for _, event in sends.sent)
    assert isinstance(first, PlacementEvent) and isinstance(again, PlacementEvent)
    assert first.reason == again.reason and first.decision_id != again.decision_id
