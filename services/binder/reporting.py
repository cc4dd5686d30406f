"""What the binder tells the pod (Events, the PodScheduled condition), off the bind path.

None of it is awaited where a placement is bound: each write runs as a task
tracked here, and `drain()` waits for the ones in flight when the binder stops
(or when a test wants to read them). Every write is best effort and reports
its own failures (logged, counted); none can change a binding's outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from schemas.events import PlacementEvent

log = logging.getLogger(__name__)


class SchedulingEvents(Protocol):
    """services.binder.kube_events.EventRecorder"""

    async def scheduled(self, placement: PlacementEvent) -> bool: ...

    async def failed_scheduling(self, placement: PlacementEvent, message: str) -> bool: ...


class UnschedulableCondition(Protocol):
    """services.binder.conditions.ConditionWriter"""

    async def unschedulable(self, placement: PlacementEvent, message: str) -> bool: ...


class PodReporter:
    def __init__(self, events: SchedulingEvents, conditions: UnschedulableCondition | None = None) -> None:
        self._events = events
        self._conditions = conditions
        self._tasks: set[asyncio.Task[Any]] = set()

    def scheduled(self, placement: PlacementEvent) -> None:
        self._spawn(self._events.scheduled(placement))

    def failed_scheduling(self, placement: PlacementEvent, message: str) -> None:
        self._spawn(self._events.failed_scheduling(placement, message))

    def unschedulable(self, placement: PlacementEvent, message: str) -> None:
        """kube-scheduler's pair for a pod that fits nowhere: the condition and the Event."""
        if self._conditions is not None:
            self._spawn(self._conditions.unschedulable(placement, message))
        self._spawn(self._events.failed_scheduling(placement, message))

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for every write started so far (and any they started)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, write: Coroutine[Any, Any, bool]) -> None:
        task = asyncio.create_task(write)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # The writers catch their own errors; this is a bug in one of them, not a lost binding.
            log.error("binder.report_error", extra={"fields": {"error": repr(task.exception())}})
