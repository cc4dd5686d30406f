"""core/v1 Events on the pod, worded like kube-scheduler's.

`Scheduled` (Normal) when a pod is bound; `FailedScheduling` (Warning) when it
is unschedulable or its binding failed. Events are best effort: a failed
Event is logged and counted, never a reason to fail the binding.
"""

from __future__ import annotations

import datetime
import logging
import secrets

from kubernetes_asyncio import client

from schemas.events import PlacementEvent
from services.binder import metrics
from services.binder.outcome import describe_devices

log = logging.getLogger(__name__)

SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
NORMAL = "Normal"
WARNING = "Warning"


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


class EventRecorder:
    """Writes the scheduling Events of one scheduler name."""

    def __init__(self, core: client.CoreV1Api, *, component: str, request_timeout_seconds: float = 5.0) -> None:
        self._core = core
        self._component = component
        self._timeout = request_timeout_seconds

    async def scheduled(self, placement: PlacementEvent) -> bool:
        return await self._record(placement, SCHEDULED, NORMAL, scheduled_message(placement))

    async def failed_scheduling(self, placement: PlacementEvent, message: str) -> bool:
        return await self._record(placement, FAILED_SCHEDULING, WARNING, message)

    async def _record(self, placement: PlacementEvent, reason: str, event_type: str, message: str) -> bool:
        body = pod_event(
            placement,
            reason=reason,
            event_type=event_type,
            message=message,
            component=self._component,
            now=datetime.datetime.now(datetime.UTC),
        )
        try:
            await self._core.create_namespaced_event(placement.namespace, body, _request_timeout=self._timeout)
        except Exception as exc:  # noqa: BLE001 — best effort by design; the binding stands
            metrics.EVENTS_FAILED.inc()
            log.warning(
                "binder.event_failed",
                extra={
                    "fields": {
                        "pod": f"{placement.namespace}/{placement.name}",
                        "reason": reason,
                        "error": repr(exc),
                    }
                },
            )
            return False
        return True
