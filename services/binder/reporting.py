"""What the binder tells the pod (Events, the PodScheduled condition), off the bind path.

None of it is awaited where a placement is bound: each write runs as a task
tracked here, and `drain()` waits for the ones in flight when the binder stops
(or when a test wants to read them). Every write is best effort and reports
its own failures (logged, counted); none can change a binding's outcome.

A placement is anyone's message, so nothing is written on its word alone:
before each write the binder's own API watch must have the pod with the
placement's uid and name, naming this scheduler, and unbound (for Scheduled:
unbound as far as the watch has seen, or bound to the placement's node), not
being deleted. Otherwise nothing is written, and the skip is counted by why
(`report_refusal`). A pod the watch has not seen yet is skipped too: the
Events of a pod too new for the watch are lost, never written onto a pod that
is not ours.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from schemas.events import PlacementEvent
from services.binder import metrics
from services.binder.outcome import PodView

log = logging.getLogger(__name__)


class PodWatch(Protocol):
    """services.binder.cluster_view.ClusterView: the pods as the binder's API watch has them."""

    scheduler_name: str

    def pod(self, uid: str) -> PodView | None: ...

    def pod_name(self, uid: str) -> tuple[str, str] | None: ...


def report_refusal(placement: PlacementEvent, watch: PodWatch, *, bound_here_ok: bool) -> str | None:
    """Why nothing may be written to the placement's pod (a metric label), or None when it may.

    `bound_here_ok`: the write reports a binding (Scheduled), so a pod the watch already sees
    bound to the placement's node is the one meant."""
    pod = watch.pod(placement.uid)
    if pod is None:
        return "not_seen"
    if watch.pod_name(placement.uid) != (placement.namespace, placement.name):
        return "other_pod"
    if pod.scheduler_name != watch.scheduler_name:
        return "other_scheduler"
    if pod.terminating or pod.finished:
        return "terminating"
    if pod.node_name and not (bound_here_ok and pod.node_name == placement.node):
        return "bound"
    return None


class SchedulingEvents(Protocol):
    """services.binder.kube_events.EventRecorder"""

    async def scheduled(self, placement: PlacementEvent) -> bool: ...

    async def failed_scheduling(self, placement: PlacementEvent, message: str) -> bool: ...


class UnschedulableCondition(Protocol):
    """services.binder.conditions.ConditionWriter"""

    async def unschedulable(self, placement: PlacementEvent, message: str, reason: str = ...) -> bool: ...


class PodReporter:
    """`watch`: what decides whether a pod may be written to (the service passes its ClusterView);
    None only where there is no watch to ask (tests of the writers), and then nothing is checked."""

    def __init__(
        self,
        events: SchedulingEvents,
        conditions: UnschedulableCondition | None = None,
        *,
        watch: PodWatch | None,
    ) -> None:
        self._events = events
        self._conditions = conditions
        self._watch = watch
        self._tasks: set[asyncio.Task[Any]] = set()

    def scheduled(self, placement: PlacementEvent) -> None:
        if self._may_write(placement, bound_here_ok=True):
            self._spawn(self._events.scheduled(placement))

    def failed_scheduling(self, placement: PlacementEvent, message: str) -> None:
        if self._may_write(placement, bound_here_ok=False):
            self._spawn(self._events.failed_scheduling(placement, message))

    def unschedulable(self, placement: PlacementEvent, message: str, reason: str = "") -> None:
        """kube-scheduler's pair for a pod that fits nowhere: the condition and the Event. `reason`: the
        condition's, when not Unschedulable (SchedulerError: a PreBind step failed)."""
        if not self._may_write(placement, bound_here_ok=False):
            return
        if self._conditions is not None:
            write = self._conditions.unschedulable(placement, message, reason) if reason else None
            self._spawn(write or self._conditions.unschedulable(placement, message))
        self._spawn(self._events.failed_scheduling(placement, message))

    def _may_write(self, placement: PlacementEvent, *, bound_here_ok: bool) -> bool:
        if self._watch is None:
            return True
        why = report_refusal(placement, self._watch, bound_here_ok=bound_here_ok)
        if why is None:
            return True
        metrics.REPORTS_SKIPPED.labels(why=why).inc()
        log.info(
            "binder.report_skipped",
            extra={"fields": {"pod": f"{placement.namespace}/{placement.name}", "uid": placement.uid, "why": why}},
        )
        return False

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
