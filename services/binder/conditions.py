"""The pod's PodScheduled condition when it cannot be scheduled, as kube-scheduler writes it.

`PodScheduled=False, reason=Unschedulable, message=<why>` through a strategic
merge patch of pods/status: conditions merge by `type` there, so the patch
replaces this one condition and leaves the others (and a kubelet's writes)
alone, with no read first and no resourceVersion to conflict on. A bound pod
gets `PodScheduled=True` from the binding itself (the API server sets it).

The patch carries the placement's pod uid in `metadata.uid`, as the kubelet's
status patches do: a pod deleted and re-created under the name since the
binder's watch looked is refused by the server (422, uid immutable; 409 on a
PUT), never written. The message is bounded as the Event's is
(`kube_events.truncate_message`, 1,024 bytes): kube-scheduler leaves the
condition's message whole, but a reason is a topic producer's text and pod
status is no place for 20 KB of it.

Best effort like Events, but retried: 429, 5xx and timeouts are retried with
the binder's backoff; a pod that is gone (404) needs no condition.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas.events import PlacementEvent
from services.binder import metrics
from services.binder.apply import api_error_text, raw_call
from services.binder.kube_events import truncate_message
from services.binder.retry import BackoffPolicy, RetriesExhausted, RetryBudget, call_with_retry

log = logging.getLogger(__name__)

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"
CONDITION_POLICY = BackoffPolicy(base_seconds=0.2, cap_seconds=5.0, max_attempts=5, deadline_seconds=30.0)


def unschedulable_patch(message: str, now: datetime.datetime, uid: str, reason: str = UNSCHEDULABLE) -> dict[str, Any]:
    condition = {
        "type": POD_SCHEDULED,
        "status": "False",
        "reason": reason,
        "message": truncate_message(message),
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}


def uid_refused(exc: ApiException) -> bool:
    """The server refused the write because the pod under that name has another uid."""
    if exc.status not in (409, 422):
        return False
    text = api_error_text(exc)
    return "metadata.uid" in text or "UID in precondition" in text


class ConditionWriter:
    def __init__(
        self,
        core: client.CoreV1Api,
        *,
        policy: BackoffPolicy = CONDITION_POLICY,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._core = core
        self._policy = policy
        self._sleep = sleep

    async def unschedulable(self, placement: PlacementEvent, message: str, reason: str = UNSCHEDULABLE) -> bool:
        """Write PodScheduled=False on the pod (`reason`: Unschedulable, or kube's SchedulerError when a
        PreBind step failed); False when it could not be written."""
        call = functools.partial(
            self._core.patch_namespaced_pod_status,
            placement.name,
            placement.namespace,
            unschedulable_patch(message, datetime.datetime.now(datetime.UTC), placement.uid, reason),
            _content_type=STRATEGIC_MERGE_PATCH,  # type: ignore[call-arg]  # the runtime takes it; the stub lacks it
            _preload_content=False,
            _request_timeout=self._policy.request_timeout_seconds,
        )
        try:
            await call_with_retry(
                "patch pod status", functools.partial(raw_call, call), RetryBudget(self._policy), sleep=self._sleep
            )
        except (ApiException, RetriesExhausted) as exc:
            if isinstance(exc, ApiException) and exc.status == 404:
                return False  # the pod is gone: nobody will read its condition
            if isinstance(exc, ApiException) and uid_refused(exc):
                metrics.REPORTS_SKIPPED.labels(why="pod_replaced").inc()
                log.info(
                    "binder.condition_skipped",
                    extra={"fields": {"pod": f"{placement.namespace}/{placement.name}", "why": "pod_replaced"}},
                )
                return False  # another pod has the name now: the condition was not its to get
            error = api_error_text(exc) if isinstance(exc, ApiException) else str(exc)
            metrics.CONDITIONS_FAILED.inc()
            log.warning(
                "binder.condition_failed",
                extra={"fields": {"pod": f"{placement.namespace}/{placement.name}", "error": error}},
            )
            return False
        return True
