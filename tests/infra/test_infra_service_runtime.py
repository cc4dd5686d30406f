"""run_service: the stages start in order behind their gates, and everything stops in one place, in reverse."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from schemas import topics
from topoplace.config import Settings
from topoplace.kafka.records import Received
from topoplace.service_runtime import Fence, Gate, Loop, RunContext, ServiceRun, ServiceSpec, Stage, Work, run_service

_names = itertools.count()


def spec(
    bootstrap: str, build: Callable[[RunContext], Coroutine[Any, Any, ServiceRun]], stop: asyncio.Event
) -> ServiceSpec:
    settings = Settings(kafka_bootstrap=bootstrap, kafka_idempotence=False)
    return ServiceSpec(
        name=f"runtime-test-{next(_names)}", log_name="runtime_test", settings=settings, build=build, stop=stop
    )


class Journal:
    """What the loops did, in order, and an event per entry to wait on."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self._seen: dict[str, asyncio.Event] = {}

    def note(self, entry: str) -> None:
        self.entries.append(entry)
        self.seen(entry).set()

    def seen(self, entry: str) -> asyncio.Event:
        return self._seen.setdefault(entry, asyncio.Event())

    def loop(self, name: str) -> Loop:
        async def run() -> None:
            self.note(f"start {name}")
            try:
                await asyncio.Event().wait()  # until cancelled
            finally:
                self.note(f"stop {name}")

        return Loop(name, run)

    async def closing(self) -> None:
        self.note("closing")


async def test_stages_wait_for_their_gates_and_stop_in_reverse_after_the_closing(kafka_bootstrap: str) -> None:
    journal = Journal()
    first_list = asyncio.Event()

    async def build(run: RunContext) -> ServiceRun:
        return ServiceRun(
            stages=(
                Stage(loops=(journal.loop("lease"),)),
                Stage(loops=(journal.loop("watch"),), gates=(Gate(name="the first list", passed=first_list),)),
                Stage(loops=(journal.loop("late"),)),
            ),
            working=lambda: journal.note("working"),
            closing=journal.closing,
        )

    stop = asyncio.Event()
    service = asyncio.create_task(run_service(spec(kafka_bootstrap, build, stop)))
    try:
        await asyncio.wait_for(journal.seen("start watch").wait(), 30)
        assert "start late" not in journal.entries and "working" not in journal.entries  # behind the gate
        first_list.set()
        await asyncio.wait_for(journal.seen("start late").wait(), 30)
    finally:
        stop.set()
        await asyncio.wait_for(service, 30)
    assert journal.entries == [
        "start lease",
        "start watch",
        "working",
        "start late",
        "closing",
        "stop late",
        "stop watch",
        "stop lease",  # first in, last out: a Lease is given back last
    ]


async def test_a_loop_that_fails_with_a_bug_stops_the_others_and_the_service_raises_it(kafka_bootstrap: str) -> None:
    journal = Journal()

    async def broken() -> None:
        await journal.seen("start watch").wait()
        raise ValueError("a bug, not an outage")

    async def build(run: RunContext) -> ServiceRun:
        return ServiceRun(
            stages=(Stage(loops=(journal.loop("watch"), Loop("broken", broken))),), closing=journal.closing
        )

    with pytest.raises(ValueError, match="a bug"):
        await asyncio.wait_for(run_service(spec(kafka_bootstrap, build, asyncio.Event())), 30)
    assert journal.entries == ["start watch", "closing", "stop watch"]


async def test_a_lost_fence_ends_the_work_before_anything_else_stops(kafka_bootstrap: str) -> None:
    journal = Journal()
    lost = asyncio.Event()

    async def handle(message: Received) -> None:
        return None

    async def guard(work: asyncio.Task[None]) -> None:
        await lost.wait()
        work.cancel()
        await asyncio.wait({work})
        journal.note("work ended by the guard")

    async def build(run: RunContext) -> ServiceRun:
        work = Work(
            topics=(topics.PODS_PENDING,), handler=handle, ready_when_joined=False, fence=Fence(lost=lost, guard=guard)
        )
        return ServiceRun(
            stages=(Stage(loops=(journal.loop("lease"),)),),
            work=work,
            working=lambda: journal.note("working"),
            closing=journal.closing,
        )

    service = asyncio.create_task(run_service(spec(kafka_bootstrap, build, asyncio.Event())))
    await asyncio.wait_for(journal.seen("working").wait(), 30)
    lost.set()
    await asyncio.wait_for(service, 30)  # the work ended: so did the run
    assert journal.entries == ["working", "start lease", "work ended by the guard", "closing", "stop lease"]
