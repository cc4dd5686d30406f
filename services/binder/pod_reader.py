"""A pod read from the API server when the binder's watch has not seen it yet.

The watch may lag behind a pod just created; the binder then asks the server
rather than binding on the placement's word. Only the fields the checks need
are kept (`PodRecord`), as in the watch's view.
"""

from __future__ import annotations

import functools

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from services.binder.apply import raw_call
from services.binder.kube_objects import PlacementRules, PodObject
from services.binder.outcome import PodView
from services.binder.retry import DEFAULT_POLICY, BackoffPolicy, RetryBudget, call_with_retry

_pod_decoder = msgspec.json.Decoder(PodObject)


class PodRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One pod as the checks read it: its view, its namespace/name, what it asks of its node."""

    view: PodView
    name: tuple[str, str]
    rules: PlacementRules | None  # None when the pod is bound or not ours (nothing to check it on)


class PodReader:
    def __init__(self, core: client.CoreV1Api, *, policy: BackoffPolicy = DEFAULT_POLICY) -> None:
        self._core = core
        self._policy = policy

    async def read(self, namespace: str, name: str) -> PodRecord | None:
        """The pod of that name now; None when there is none. Raises when it cannot be read."""
        call = functools.partial(
            self._core.read_namespaced_pod,
            name,
            namespace,
            _preload_content=False,
            _request_timeout=self._policy.request_timeout_seconds,
        )
        try:
            body = await call_with_retry("read pod", functools.partial(raw_call, call), RetryBudget(self._policy))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        pod = _pod_decoder.decode(body)
        meta = pod.metadata
        return PodRecord(view=pod.view(), name=(meta.namespace, meta.name), rules=pod.placement_rules())
