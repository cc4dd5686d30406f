"""core/v1 Events on the pod, worded like kube-scheduler's.

`Scheduled` (Normal) when a pod is bound; `FailedScheduling` (Warning) when it
is unschedulable or its binding failed. Events are best effort: a failed
Event is logged, counted and retried in the background, never a reason to
fail (or delay) the binding. A repeated Event updates the count of the first.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas.events import PlacementEvent
from services.binder import metrics
from services.binder.outcome import describe_devices
from services.binder.retry import BackoffPolicy, full_jitter_delay

log = logging.getLogger(__name__)

SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
NORMAL = "Normal"
WARNING = "Warning"

# client-go's event correlator: 10 minutes of aggregation, an LRU of 4096 recent Events.
AGGREGATE_WINDOW_S = 600.0
CACHE_SIZE = 4096
# A failed write is tried again in the background (about 10 s in all); this many at once at most.
EVENT_RETRY = BackoffPolicy(base_seconds=0.5, cap_seconds=5.0, max_attempts=5, deadline_seconds=30.0)
MAX_RETRYING = 256
MERGE_PATCH = "application/merge-patch+json"
# kube-scheduler bounds the message of its FailedScheduling Events to the events API's note limit
# (pkg/scheduler/schedule_one.go truncateMessage, validation.NoteLengthLimit = 1024 bytes): the
# first 1020 bytes and " ...". client-go's recorders do not cut; the scheduler does, so we do.
MESSAGE_LIMIT_BYTES = 1024
TRUNCATED_SUFFIX = " ..."


def truncate_message(message: str, limit: int = MESSAGE_LIMIT_BYTES) -> str:
    """The message within `limit` UTF-8 bytes, cut as kube-scheduler cuts it, but on a character
    boundary (Go slices bytes and may split a character; JSON here must stay valid UTF-8)."""
    encoded = message.encode()
    if len(encoded) <= limit:
        return message
    head = encoded[: limit - len(TRUNCATED_SUFFIX)].decode(errors="ignore")  # drops a split last character
    return head + TRUNCATED_SUFFIX


def scheduled_message(placement: PlacementEvent) -> str:
    base = f"Successfully assigned {placement.namespace}/{placement.name} to {placement.node}"
    if placement.devices:
        return f"{base} (devices {describe_devices(placement.devices)})"
    return base


def pod_event(
    placement: PlacementEvent,
    *,
    reason: str,
    event_type: str,
    message: str,
    component: str,
    now: datetime.datetime,
) -> client.CoreV1Event:
    # Named like client-go's recorder: "<pod>.<unique hex>", so events never collide.
    name = f"{placement.name}.{int(now.timestamp() * 1e9):x}{secrets.token_hex(2)}"
    return client.CoreV1Event(
        metadata=client.V1ObjectMeta(name=name, namespace=placement.namespace),
        involved_object=client.V1ObjectReference(
            api_version="v1",
            kind="Pod",
            namespace=placement.namespace,
            name=placement.name,
            uid=placement.uid,
        ),
        reason=reason,
        type=event_type,
        message=message,
        source=client.V1EventSource(component=component),
        reporting_component=component,
        reporting_instance=component,
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        action="Binding" if reason == SCHEDULED else "Scheduling",
    )


class _Recent(msgspec.Struct, kw_only=True):
    """One Event written lately: where it is, and how often it was reported."""

    name: str
    namespace: str
    count: int
    seen_at: float  # clock() of the last report


EventKey = tuple[str, str, str]  # involved pod uid, reason, message


class EventRecorder:
    """Writes the scheduling Events of one scheduler name, as client-go's recorder does.

    - The same pod, reason and message within `window_seconds` of the last report
      updates one Event (PATCH count and lastTimestamp) instead of creating another:
      a relist that reports 375 unschedulable pods again writes no new Events.
      Recent Events are remembered in an LRU of `cache_size` entries.
    - A write that fails is retried in the background with backoff (`retry`), at
      most `max_retrying` at once (more are dropped and counted): never blocking
      the binding. `close()` cancels what is still retrying.
    """

    def __init__(
        self,
        core: client.CoreV1Api,
        *,
        component: str,
        request_timeout_seconds: float = 5.0,
        window_seconds: float = AGGREGATE_WINDOW_S,
        cache_size: int = CACHE_SIZE,
        retry: BackoffPolicy = EVENT_RETRY,
        max_retrying: int = MAX_RETRYING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._core = core
        self._component = component
        self._timeout = request_timeout_seconds
        self._window = window_seconds
        self._cache_size = cache_size
        self._retry = retry
        self._max_retrying = max_retrying
        self._clock = clock
        self._recent: OrderedDict[EventKey, _Recent] = OrderedDict()
        self._retrying: set[asyncio.Task[None]] = set()

    async def scheduled(self, placement: PlacementEvent) -> bool:
        return await self._record(placement, SCHEDULED, NORMAL, scheduled_message(placement))

    async def failed_scheduling(self, placement: PlacementEvent, message: str) -> bool:
        return await self._record(placement, FAILED_SCHEDULING, WARNING, message)

    def remembered(self) -> int:
        return len(self._recent)

    def retrying(self) -> int:
        return len(self._retrying)

    async def drain(self) -> None:
        """Wait until no write is being retried (tests; a clean stop)."""
        while self._retrying:
            await asyncio.gather(*self._retrying, return_exceptions=True)

    async def close(self) -> None:
        tasks = list(self._retrying)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _record(self, placement: PlacementEvent, reason: str, event_type: str, message: str) -> bool:
        """One try now (so the Event is there before the outcome is published); retries in the background."""
        key = (placement.uid, reason, truncate_message(message))
        try:
            await self._write(placement, key, event_type)
        except Exception as exc:  # noqa: BLE001 — best effort by design; the binding stands
            metrics.EVENTS_FAILED.inc()
            self._log_failure(placement, reason, exc, retrying=self._retry_later(placement, key, event_type))
            return False
        return True

    async def _write(self, placement: PlacementEvent, key: EventKey, event_type: str) -> None:
        now = datetime.datetime.now(datetime.UTC)
        seen_at = self._clock()
        recent = self._recent.get(key)
        if recent is not None and seen_at - recent.seen_at <= self._window:
            patch = {"count": recent.count + 1, "lastTimestamp": now.isoformat().replace("+00:00", "Z")}
            try:
                await self._core.patch_namespaced_event(
                    recent.name, recent.namespace, patch,
                    _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # the runtime takes it; the stub lacks it
                    _request_timeout=self._timeout,
                )  # fmt: skip
            except ApiException as exc:
                if exc.status != 404:
                    raise
                # The Event expired on the server (its TTL): write a new one below.
            else:
                recent.count += 1
                recent.seen_at = seen_at
                self._recent.move_to_end(key)
                return
        _, reason, message = key
        body = pod_event(
            placement, reason=reason, event_type=event_type, message=message, component=self._component, now=now
        )
        await self._core.create_namespaced_event(placement.namespace, body, _request_timeout=self._timeout)
        self._remember(key, _Recent(name=body.metadata.name, namespace=placement.namespace, count=1, seen_at=seen_at))

    def _remember(self, key: EventKey, recent: _Recent) -> None:
        self._recent[key] = recent
        self._recent.move_to_end(key)
        while len(self._recent) > self._cache_size:
            self._recent.popitem(last=False)

    def _retry_later(self, placement: PlacementEvent, key: EventKey, event_type: str) -> bool:
        if len(self._retrying) >= self._max_retrying or self._retry.max_attempts < 2:
            metrics.EVENTS_DROPPED.inc()
            return False
        task = asyncio.create_task(self._retry_write(placement, key, event_type), name=f"event-retry-{placement.uid}")
        self._retrying.add(task)
        task.add_done_callback(self._retrying.discard)
        return True

    async def _retry_write(self, placement: PlacementEvent, key: EventKey, event_type: str) -> None:
        for retry in range(self._retry.max_attempts - 1):
            await asyncio.sleep(full_jitter_delay(self._retry, retry, random.random))  # backoff before the retry
            try:
                await self._write(placement, key, event_type)
                return
            except Exception as exc:  # noqa: BLE001 — best effort by design
                metrics.EVENTS_FAILED.inc()
                last = exc
        metrics.EVENTS_DROPPED.inc()
        self._log_failure(placement, key[1], last, retrying=False)

    def _log_failure(self, placement: PlacementEvent, reason: str, exc: Exception, *, retrying: bool) -> None:
        log.warning(
            "binder.event_failed",
            extra={
                "fields": {
                    "pod": f"{placement.namespace}/{placement.name}",
                    "reason": reason,
                    "error": repr(exc),
                    "retrying": retrying,
                }
            },
        )
