"""Apply one placement to the cluster: ONE pods/binding request per pod.

The Binding carries the device annotations in its metadata: the API server
copies a Binding's `metadata.annotations` onto the pod in the same write that
sets its node (the registry's assign-pod step), so the pod never has a node
without its devices, and bind + annotate is one request. The Binding's
`metadata.uid` is the precondition: a pod deleted and re-created under the
same name since the placer saw it is refused (409).

The pod is read only when the binding answers 409 or 404, to tell an earlier
bind of ours whose reply was lost (bound here: success) from a pod bound
elsewhere (conflict) or gone (failed). Before binding, the watch's view of
the pod (when it has one) settles a pod already bound or being deleted
without any request.

Replies are read raw (`_preload_content=False`): the binder never needs a
reply model, and building kubernetes-asyncio's models costs most of the
client's CPU. The status is checked here instead.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import annotations as pod_annotations
from schemas.enforcement import Enforcement
from schemas.events import BindingOutcome, PlacementEvent
from schemas.seal import SEAL, DecisionKey
from services.binder import metrics
from services.binder.claims import ClaimWriter
from services.binder.hami_devices import hami_annotations
from services.binder.hami_lock import NodeLocker
from services.binder.kube_objects import PodObject, status_message
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

_pod_decoder = msgspec.json.Decoder(PodObject)


DEFAULT_LOCK_RELEASE_SECONDS = 60.0


def _no_device_memory(node: str, index: int) -> int | None:
    return None


def _no_device_uuid(node: str, index: int) -> str | None:
    return None


class BindResult(msgspec.Struct, frozen=True, kw_only=True):
    outcome: BindingOutcome
    reason: str = ""
    attempts: int = 1
    bound_now: bool = False  # this call created the Binding (not a pod found already bound)
    resource_version_changed: bool = False  # the pod changed since the placer saw it (informational)
    retryable: bool = False  # not bound for a while only (retries spent on faults, a lock held): worth another try


def device_annotations(placement: PlacementEvent, key: DecisionKey | None = None) -> dict[str, str]:
    """The devices, node and decision for people to read, and (with `key`) the seal readers trust."""
    annotations = {
        pod_annotations.DEVICES: pod_annotations.encode_devices(placement.devices),
        pod_annotations.NODE: placement.node,
        pod_annotations.DECISION: placement.decision_id,
    }
    if key is not None:
        annotations[SEAL] = key.seal(placement.uid, placement.node, placement.decision_id, placement.devices)
    return annotations


def binding_body(
    placement: PlacementEvent, extra: dict[str, str] | None = None, key: DecisionKey | None = None
) -> dict[str, Any]:
    """The Binding as JSON: the uid is the precondition, the annotations go onto the pod with the node.

    `extra`: more annotations for the pod (HAMi's, on a node HAMi enforces); `key`: the seal's."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": placement.name,
            "namespace": placement.namespace,
            "uid": placement.uid,
            "annotations": device_annotations(placement, key) | (extra or {}),
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": placement.node},
    }


def api_error_text(exc: ApiException) -> str:
    """The server's Status message when it sent one, else the HTTP reason."""
    body: object = exc.body
    if isinstance(body, str):
        body = body.encode()
    if isinstance(body, bytes) and body:
        return status_message(body, int(exc.status or 0))
    return f"HTTP {exc.status} {exc.reason or ''}".strip()


async def raw_call(call: Callable[[], Awaitable[Any]]) -> bytes:
    """Run a kubernetes-asyncio call made with `_preload_content=False`; the body of a 2xx reply.

    Any other status is raised as an ApiException carrying the body, as the client would.
    """
    reply = await call()
    try:
        body: bytes = await reply.read()
    finally:
        reply.release()
    if not 200 <= reply.status <= 299:
        exc = ApiException(status=reply.status, reason=reply.reason)
        exc.body = body
        raise exc
    return body


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
        claims: ClaimWriter | None = None,
        wall_clock: Callable[[], float] = time.time,
        device_memory: Callable[[str, int], int | None] = _no_device_memory,
        device_uuid: Callable[[str, int], str | None] = _no_device_uuid,
        lock_release_seconds: float = DEFAULT_LOCK_RELEASE_SECONDS,
        decision_key: DecisionKey | None = None,
    ) -> None:
        """`device_memory(node, index)`: a device's MiB from the topology (HAMi needs it for whole GPUs);
        `device_uuid(node, index)`: its UUID from the topology (what HAMi's annotations name).
        `lock_release_seconds`: when HAMi's node lock of a bound pod is removed if HAMi's device
        plugin has not done so (it releases the lock in Allocate). `decision_key`: the seal's key
        (schemas/seal.py); without it the binder's bindings carry no seal and no pod's devices count."""
        self._decision_key = decision_key
        self._core = core
        self._claims = claims or ClaimWriter(
            client.ResourceV1Api(core.api_client),  # type: ignore[attr-defined]  # the stubs omit it
            request_timeout=policy.request_timeout_seconds,
        )
        self._policy = policy
        self._sleep = sleep
        self._clock = clock
        self._rand = rand
        self._wall_clock = wall_clock
        self._device_memory = device_memory
        self._device_uuid = device_uuid
        self._lock_release_seconds = lock_release_seconds
        self._locker = NodeLocker(core, raw_call, wall_clock=wall_clock, request_timeout=policy.request_timeout_seconds)
        self._releases: set[asyncio.Task[None]] = set()
        # One HAMi bind per node at a time in this process (HAMi's scheduler does the same):
        # our own placements then never meet each other's node lock mid-bind.
        self._node_mutexes: dict[str, asyncio.Lock] = {}  # by node name; as many as nodes

    def budget(self) -> RetryBudget:
        return RetryBudget(self._policy, clock=self._clock, rand=self._rand)

    async def bind(self, placement: PlacementEvent, known: PodView | None = None) -> BindResult:
        """Bind the placement's pod. `known`: the watch's view of the pod, when it has one."""
        budget = self.budget()
        try:
            if placement.enforcement is Enforcement.HAMI and placement.devices:
                return await self._bind_hami(placement, known, budget)
            return await self._bind(placement, known, budget)
        except RetriesExhausted as exc:
            return BindResult(outcome=BindingOutcome.FAILED, reason=str(exc), attempts=budget.attempts, retryable=True)
        except ApiException as exc:
            # Only answers that retrying cannot change get here (400/403/422...).
            return BindResult(
                outcome=BindingOutcome.FAILED,
                reason=f"the API server refused the binding: {api_error_text(exc)}",
                attempts=budget.attempts,
            )

    async def current_pod(self, namespace: str, name: str) -> PodView | None:
        """The pod read from the server with a budget of its own; raises when it cannot be read."""
        return await self.read_pod(namespace, name, self.budget())

    async def read_pod(self, namespace: str, name: str, budget: RetryBudget) -> PodView | None:
        """The pod as the server has it now; None when there is none of that name."""
        try:
            body = await self._call(
                "read pod",
                functools.partial(
                    self._core.read_namespaced_pod,
                    name,
                    namespace,
                    _preload_content=False,
                    _request_timeout=self._policy.request_timeout_seconds,
                ),
                budget,
            )
        except ApiException as exc:
            if _status_kind(exc) is ApiErrorKind.NOT_FOUND:
                return None
            raise
        return _pod_decoder.decode(body).view(self._decision_key)

    async def _bind_hami(self, placement: PlacementEvent, known: PodView | None, budget: RetryBudget) -> BindResult:
        """HAMi's annotations in the Binding, under HAMi's node lock (see services/binder/hami_lock.py)."""
        annotations = hami_annotations(
            placement, self._device_memory, self._wall_clock(), device_uuid=self._device_uuid
        )
        if isinstance(annotations, str):
            return BindResult(outcome=BindingOutcome.FAILED, reason=annotations, attempts=budget.attempts)
        mutex = self._node_mutexes.setdefault(placement.node, asyncio.Lock())
        async with mutex:
            # The pods of one node queue here (a gang's members among them): a deadline that ran
            # while this one waited left it a single try once its turn came.
            budget.start_now()
            lock = await self._locker.acquire(placement.node, placement.namespace, placement.name, budget)
            if not lock.taken:
                return BindResult(
                    outcome=BindingOutcome.CONFLICT, reason=lock.reason, attempts=budget.attempts, retryable=True
                )
            try:
                result = await self._bind(placement, known, budget, annotations)
            except asyncio.CancelledError:  # released in the background, never held on
                self._release_later(placement, 0.0)
                raise
            except BaseException:
                # Before the next pod of this node takes the mutex: else it meets this lock and
                # every pod queued behind it is refused in turn.
                await self._release(placement, 0.0)
                raise
            # HAMi's device plugin releases the lock in Allocate. Without its plugin on the node,
            # or when this call bound nothing, nobody would: then it goes now, before the next
            # pod of this node; else after a while at most.
            if lock.hami_plugin and result.bound_now:
                self._release_later(placement, self._lock_release_seconds)
            else:
                await self._release(placement, 0.0)
            return result

    def _release_later(self, placement: PlacementEvent, wait: float) -> None:
        task = asyncio.create_task(self._release(placement, wait))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _release(self, placement: PlacementEvent, wait: float) -> None:
        if wait > 0:
            await self._sleep(wait)
        try:
            await self._locker.release(placement.node, placement.namespace, placement.name, self.budget())
        except (RetriesExhausted, ApiException) as exc:
            # HAMi's own timeout ends the lock then.
            log.warning("binder.hami_unlock_failed", extra={"fields": {"node": placement.node, "error": str(exc)}})

    async def drain_releases(self) -> None:
        """Wait for the lock releases under way (tests, shutdown)."""
        while self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)

    async def _bind(
        self,
        placement: PlacementEvent,
        known: PodView | None,
        budget: RetryBudget,
        extra: dict[str, str] | None = None,
    ) -> BindResult:
        rv_changed = known is not None and known.resource_version != placement.pod_resource_version

        def result(outcome: BindingOutcome, reason: str = "", *, bound_now: bool = False) -> BindResult:
            return BindResult(
                outcome=outcome,
                reason=reason,
                attempts=budget.attempts,
                bound_now=bound_now,
                resource_version_changed=rv_changed,
            )

        if known is not None:
            # Settled without a request: bound and being-deleted never go back (attempts 0).
            judgement = judge_pod(known, placement)
            settled = outcome_of(judgement.standing)
            if settled is not None:
                return BindResult(outcome=settled, reason=judgement.reason, attempts=0)
        if placement.claims:  # DRA: allocated and reserved for the pod before it has a node
            refused = await self._claims.allocate(placement, functools.partial(self._call, budget=budget))
            if refused is not None:
                return result(refused.outcome, refused.reason)
        try:
            await self._call(
                "create binding",
                functools.partial(
                    self._core.create_namespaced_pod_binding,
                    placement.name,
                    placement.namespace,
                    binding_body(placement, extra, self._decision_key),  # type: ignore[arg-type]  # a plain dict serialises as it is
                    _preload_content=False,
                    _request_timeout=self._policy.request_timeout_seconds,
                ),
                budget,
            )
        except ApiException as exc:
            if _status_kind(exc) not in (ApiErrorKind.CONFLICT, ApiErrorKind.NOT_FOUND):
                raise
            # 409: already bound (maybe by our own earlier try whose reply was lost), or
            # the uid no longer matches. 404: gone. The pod itself says which.
            pod = await self.read_pod(placement.namespace, placement.name, budget)
            judgement = judge_pod(pod, placement)
            settled = outcome_of(judgement.standing)
            if settled is None:
                return result(BindingOutcome.FAILED, f"binding refused: {api_error_text(exc)}")
            return result(settled, judgement.reason)
        return result(BindingOutcome.BOUND, bound_now=True)

    async def _call(self, operation: str, call: Callable[[], Awaitable[Any]], budget: RetryBudget) -> bytes:
        return await call_with_retry(
            operation, functools.partial(raw_call, call), budget, sleep=self._sleep, on_retry=_count_retry
        )


def _status_kind(exc: ApiException) -> ApiErrorKind:
    return classify_status(int(exc.status or 0))


def _count_retry(operation: str, error: str) -> None:
    metrics.RETRIES.labels(operation=operation).inc()
    log.warning("binder.retry", extra={"fields": {"operation": operation, "error": error}})
