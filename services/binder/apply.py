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

What the pod's enforcement path adds (HAMi's annotations and node lock, DRA's
claims written first) comes from services/binder/enforcers/: PodBinder asks
the registry which paths apply and runs their hooks, whatever the path.

Replies are read raw (`_preload_content=False`, services/binder/raw_api.py):
the binder never needs a reply model, and building kubernetes-asyncio's
models costs most of the client's CPU.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
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
from services.binder.enforcers import ENFORCERS, EnforcerFactory, Enforcers
from services.binder.enforcers.base import BinderParts, Enforcer, NotBound
from services.binder.kube_objects import PodObject
from services.binder.neuron_cores import NeuronCoreNames, NoNeuronCores
from services.binder.outcome import (
    ApiErrorKind,
    BindResult,
    PodView,
    classify_status,
    judge_pod,
    outcome_of,
)
from services.binder.raw_api import api_error_text, raw_call
from services.binder.retry import (
    DEFAULT_POLICY,
    BackoffPolicy,
    RetriesExhausted,
    RetryBudget,
    call_with_retry,
)

__all__ = ["BindResult", "PodBinder", "api_error_text", "binding_body", "device_annotations", "raw_call"]

log = logging.getLogger(__name__)

_pod_decoder = msgspec.json.Decoder(PodObject)


DEFAULT_LOCK_RELEASE_SECONDS = 60.0


def _no_device_memory(node: str, index: int) -> int | None:
    return None


def _no_device_uuid(node: str, index: int) -> str | None:
    return None


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

    `extra`: more annotations for the pod (its enforcement paths', e.g. HAMi's); `key`: the seal's."""
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


class PodBinder:
    """Binds pods through the core/v1 API, retrying what is worth retrying.

    What a pod's enforcement path adds to its binding (annotations, a lock held across it,
    claims written before it) comes from the paths that apply (services/binder/enforcers/)."""

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
        neuron_cores: NeuronCoreNames | None = None,
        lock_release_seconds: float = DEFAULT_LOCK_RELEASE_SECONDS,
        decision_key: DecisionKey | None = None,
        enforcers: Mapping[Enforcement, EnforcerFactory] = ENFORCERS,
        volumes: Enforcer | None = None,
    ) -> None:
        """`device_memory(node, index)`: a device's MiB from the topology (HAMi needs it for whole GPUs);
        `device_uuid(node, index)`: its UUID from the topology (what HAMi's annotations name);
        `neuron_cores`: which NeuronCores of a device a pod gets (HAMi's Neuron annotations name them).
        `lock_release_seconds`: when HAMi's node lock of a bound pod is removed if HAMi's device
        plugin has not done so (it releases the lock in Allocate). `claims`: DRA's claim writer
        (None: one without a view of the cluster's claims). `decision_key`: the seal's key
        (schemas/seal.py); without it the binder's bindings carry no seal and no pod's devices count.
        `enforcers`: the enforcement paths' registry (services/binder/enforcers/). `volumes`: binds the
        pod's PersistentVolumeClaims on its node before every path's own work (VolumeBinding's PreBind,
        services/binder/volume_binding.py); None: not checked."""
        self._decision_key = decision_key
        self._first: tuple[Enforcer, ...] = (volumes,) if volumes is not None else ()
        self._core = core
        self._policy = policy
        self._sleep = sleep
        self._clock = clock
        self._rand = rand
        self._enforcers = Enforcers(
            BinderParts(
                core=core,
                policy=policy,
                sleep=sleep,
                new_budget=self.budget,
                wall_clock=wall_clock,
                device_memory=device_memory,
                device_uuid=device_uuid,
                lock_release_seconds=lock_release_seconds,
                claims=claims,
                neuron_cores=neuron_cores or NoNeuronCores(),
            ),
            enforcers,
        )

    def budget(self) -> RetryBudget:
        return RetryBudget(self._policy, clock=self._clock, rand=self._rand)

    async def bind(self, placement: PlacementEvent, known: PodView | None = None) -> BindResult:
        """Bind the placement's pod. `known`: the watch's view of the pod, when it has one."""
        budget = self.budget()
        enforcers = self._first + self._enforcers.for_placement(placement)
        try:
            extra: dict[str, str] = {}
            for enforcer in enforcers:
                annotations = enforcer.binding_annotations(placement)
                if isinstance(annotations, NotBound):
                    return _not_bound(annotations, budget)
                extra |= annotations
            binding = functools.partial(self._bind, placement, known, budget, enforcers, extra)
            return await _around(enforcers, placement, budget, binding)
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

    async def drain_releases(self) -> None:
        """Wait for what the enforcement paths left running, e.g. HAMi's lock releases (tests, shutdown)."""
        await self._enforcers.drain()

    async def _bind(
        self,
        placement: PlacementEvent,
        known: PodView | None,
        budget: RetryBudget,
        enforcers: tuple[Enforcer, ...],
        extra: dict[str, str],
    ) -> BindResult:
        rv_changed = known is not None and known.resource_version != placement.pod_resource_version

        def result(
            outcome: BindingOutcome,
            reason: str = "",
            *,
            bound_now: bool = False,
            retryable: bool = False,
            condition: str = "",
        ) -> BindResult:
            return BindResult(
                outcome=outcome,
                reason=reason,
                attempts=budget.attempts,
                bound_now=bound_now,
                resource_version_changed=rv_changed,
                retryable=retryable,
                condition=condition,
            )

        if known is not None:
            # Settled without a request: bound and being-deleted never go back (attempts 0).
            judgement = judge_pod(known, placement)
            settled = outcome_of(judgement.standing)
            if settled is not None:
                return BindResult(outcome=settled, reason=judgement.reason, attempts=0)
        for enforcer in enforcers:  # e.g. the pod's volumes bound, DRA's claims allocated, before it has a node
            refused = await enforcer.before_binding(placement, functools.partial(self._call, budget=budget))
            if refused is not None:
                return result(refused.outcome, refused.reason, retryable=refused.retryable, condition=refused.condition)
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


async def _around(
    enforcers: tuple[Enforcer, ...],
    placement: PlacementEvent,
    budget: RetryBudget,
    binding: Callable[[], Awaitable[BindResult]],
) -> BindResult:
    """`binding` run under every path's `around_binding`, the first path's outermost."""
    if not enforcers:
        return await binding()
    inner = functools.partial(_around, enforcers[1:], placement, budget, binding)
    answer = await enforcers[0].around_binding(placement, budget, inner)
    return _not_bound(answer, budget) if isinstance(answer, NotBound) else answer


def _not_bound(refusal: NotBound, budget: RetryBudget) -> BindResult:
    return BindResult(
        outcome=refusal.outcome,
        reason=refusal.reason,
        attempts=budget.attempts,
        retryable=refusal.retryable,
        condition=refusal.condition,
    )


def _status_kind(exc: ApiException) -> ApiErrorKind:
    return classify_status(int(exc.status or 0))


def _count_retry(operation: str, error: str) -> None:
    metrics.RETRIES.labels(operation=operation).inc()
    log.warning("binder.retry", extra={"fields": {"operation": operation, "error": error}})
