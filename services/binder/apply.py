"""Apply one placement to the cluster: annotate the pod, then create its Binding.

The order matters: the device annotation is on the pod before the pod has a
node, so whatever starts the pod's containers never sees it bound without its
devices. The pod is read first so that a pod already bound (a re-delivered
placement, another scheduler) is never re-annotated with another decision.
A 409 on the Binding is settled by reading the pod again: bound to our node
is success (at-least-once delivery), bound elsewhere is a conflict.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import annotations as pod_annotations
from schemas.events import BindingOutcome, PlacementEvent
from services.binder import metrics
from services.binder.outcome import (
    ApiErrorKind,
    PodView,
    classify_status,
    judge_pod,
    outcome_of,
)
from services.binder.retry import (
    DEFAULT_POLICY,
    BackoffPolicy,
    RetriesExhausted,
    RetryBudget,
    call_with_retry,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

MERGE_PATCH = "application/merge-patch+json"
# A pod changed between our read and our patch: read again and retry the patch this often.
MAX_PATCH_CONFLICTS = 5


class BindResult(msgspec.Struct, frozen=True, kw_only=True):
    outcome: BindingOutcome
    reason: str = ""
    attempts: int = 1
    bound_now: bool = False  # this call created the Binding (not a pod found already bound)
    resource_version_changed: bool = False  # the pod changed since the placer saw it (informational)


def pod_view(pod: client.V1Pod) -> PodView:
    meta = pod.metadata
    return PodView(
        uid=meta.uid or "",
        node_name=(pod.spec.node_name if pod.spec is not None else None) or "",
        resource_version=meta.resource_version or "",
        terminating=meta.deletion_timestamp is not None,
        annotations=dict(meta.annotations or {}),
    )


def annotation_patch(placement: PlacementEvent, resource_version: str) -> dict[str, object]:
    """Merge patch of the device annotations.

    It carries the resourceVersion we read, so the server refuses it (409) if
    the pod changed in between, e.g. another binder bound it.
    """
    metadata: dict[str, object] = {
        "annotations": {
            pod_annotations.DEVICES: pod_annotations.encode_devices(placement.devices),
            pod_annotations.NODE: placement.node,
            pod_annotations.DECISION: placement.decision_id,
        }
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata}


def binding_for(placement: PlacementEvent) -> client.V1Binding:
    # The uid makes the server refuse the Binding if the pod was deleted and
    # re-created under the same name since the placer saw it.
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=placement.name, namespace=placement.namespace, uid=placement.uid),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=placement.node),
    )


def api_error_text(exc: ApiException) -> str:
    """The server's Status message when it sent one, else the HTTP reason."""
    body: object = exc.body
    if isinstance(body, (bytes, str)) and body:
        try:
            decoded = msgspec.json.decode(body)
        except msgspec.DecodeError:
            decoded = None
        message = decoded.get("message") if isinstance(decoded, dict) else None
        if message:
            return f"HTTP {exc.status}: {message}"
    return f"HTTP {exc.status} {exc.reason or ''}".strip()


class PodBinder:
    """Binds pods through the core/v1 API, retrying what is worth retrying."""

    def __init__(
        self,
        core: client.CoreV1Api,
        *,
        policy: BackoffPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._core = core
        self._policy = policy
        self._sleep = sleep
        self._clock = clock
        self._rand = rand

    async def bind(self, placement: PlacementEvent) -> BindResult:
        budget = RetryBudget(self._policy, clock=self._clock, rand=self._rand)
        try:
            return await self._bind(placement, budget)
        except RetriesExhausted as exc:
            return BindResult(outcome=BindingOutcome.FAILED, reason=str(exc), attempts=budget.attempts)
        except ApiException as exc:
            # Only answers that retrying cannot change get here (400/403/422...).
            return BindResult(
                outcome=BindingOutcome.FAILED,
                reason=f"the API server refused the binding: {api_error_text(exc)}",
                attempts=budget.attempts,
            )

    async def _bind(self, placement: PlacementEvent, budget: RetryBudget) -> BindResult:
        pod = await self._read(placement, budget)
        rv_changed = pod is not None and pod.resource_version != placement.pod_resource_version

        def result(outcome: BindingOutcome, reason: str = "", *, bound_now: bool = False) -> BindResult:
            return BindResult(
                outcome=outcome,
                reason=reason,
                attempts=budget.attempts,
                bound_now=bound_now,
                resource_version_changed=rv_changed,
            )

        for _ in range(MAX_PATCH_CONFLICTS):
            judgement = judge_pod(pod, placement)
            settled = outcome_of(judgement.standing)
            if settled is not None:
                return result(settled, judgement.reason)
            assert pod is not None  # UNBOUND implies a pod
            try:
                await self._call(
                    "patch pod annotations",
                    functools.partial(
                        self._core.patch_namespaced_pod,
                        placement.name,
                        placement.namespace,
                        annotation_patch(placement, pod.resource_version),
                        _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # the runtime takes it; the stub lacks it
                        _request_timeout=self._policy.request_timeout_seconds,
                    ),
                    budget,
                )
                break
            except ApiException as exc:
                if not _answered_by_the_pod(exc):
                    raise
                pod = await self._read(placement, budget)
        else:
            return result(
                BindingOutcome.FAILED,
                f"pod {placement.namespace}/{placement.name} kept changing while its devices were annotated",
            )

        try:
            await self._call(
                "create binding",
                functools.partial(
                    self._core.create_namespaced_pod_binding,
                    placement.name,
                    placement.namespace,
                    binding_for(placement),
                    _request_timeout=self._policy.request_timeout_seconds,
                ),
                budget,
            )
        except ApiException as exc:
            if not _answered_by_the_pod(exc):
                raise
            # 409: already bound (maybe by our own earlier try whose reply was lost), or
            # the uid no longer matches. 404: gone. The pod itself says which.
            judgement = judge_pod(await self._read(placement, budget), placement)
            settled = outcome_of(judgement.standing)
            if settled is None:
                return result(BindingOutcome.FAILED, f"binding refused: {api_error_text(exc)}")
            return result(settled, judgement.reason)
        return result(BindingOutcome.BOUND, bound_now=True)

    async def _read(self, placement: PlacementEvent, budget: RetryBudget) -> PodView | None:
        try:
            pod = await self._call(
                "read pod",
                functools.partial(
                    self._core.read_namespaced_pod,
                    placement.name,
                    placement.namespace,
                    _request_timeout=self._policy.request_timeout_seconds,
                ),
                budget,
            )
        except ApiException as exc:
            if _status_kind(exc) is ApiErrorKind.NOT_FOUND:
                return None
            raise
        return pod_view(pod)

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]], budget: RetryBudget) -> T:
        return await call_with_retry(operation, call, budget, sleep=self._sleep, on_retry=_count_retry)


def _status_kind(exc: ApiException) -> ApiErrorKind:
    return classify_status(int(exc.status or 0))


def _answered_by_the_pod(exc: ApiException) -> bool:
    """A 409 or a 404: what it means for the placement is read from the pod itself."""
    return _status_kind(exc) in (ApiErrorKind.CONFLICT, ApiErrorKind.NOT_FOUND)


def _count_retry(operation: str, error: str) -> None:
    metrics.RETRIES.labels(operation=operation).inc()
    log.warning("binder.retry", extra={"fields": {"operation": operation, "error": error}})
