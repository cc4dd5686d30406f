"""HAMi's node lock (`hami.io/mutex.lock` on the Node), taken and released as HAMi does.

HAMi's scheduler locks a node before binding a pod there; HAMi's device plugin
releases the lock in Allocate, once it has read the pod's device annotations.
While a lock of another pod stands (younger than HAMi's timeout), no second pod is
bound to that node: the device plugin finds "the" pod in phase allocating on its
node, so two at once would be ambiguous.

Taking it: read the Node, then a merge patch carrying the Node's resourceVersion as
precondition (a concurrent writer gets 409; the read and patch are then repeated).
A lock of this pod counts as taken; an expired or unreadable one is replaced, and
so is an orphaned one: its pod is gone (as HAMi's scheduler judges it), or nobody
will ever release it: older than `orphaned_after_seconds` (longer than any binder
holds a lock while it binds) while no HAMi device plugin will Allocate its pod
(the node has none, or the pod was never bound there, because the scheduler
that locked it died first). Without this, a binder killed mid-bind leaves its
node unschedulable for HAMi's whole timeout.
Releasing it: only a lock of this pod is removed, with the same precondition.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas import hami
from schemas.enforcement import HAMI_REGISTER_ANNOTATION
from services.binder.kube_objects import NodeObject, PodObject
from services.binder.outcome import ApiErrorKind, classify_status
from services.binder.retry import RetryBudget, call_with_retry

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
LOCK_ATTEMPTS = 5  # read-and-patch rounds lost to concurrent Node writers before giving up
# A binder holds a lock while it binds, which its retry deadline (30 s by default) bounds.
ORPHANED_AFTER_SECONDS = 60.0

_node_decoder = msgspec.json.Decoder(NodeObject)
_pod_decoder = msgspec.json.Decoder(PodObject)

RawCall = Callable[[Callable[[], Awaitable[Any]]], Awaitable[bytes]]


class LockResult(msgspec.Struct, frozen=True, kw_only=True):
    taken: bool
    reason: str = ""  # why not, in words
    hami_plugin: bool = False  # the Node carries HAMi's registration: its device plugin will release the lock


class NodeLocker:
    def __init__(
        self,
        core: client.CoreV1Api,
        raw_call: RawCall,
        *,
        wall_clock: Callable[[], float],
        timeout_seconds: float = hami.NODE_LOCK_TIMEOUT_SECONDS,
        orphaned_after_seconds: float = ORPHANED_AFTER_SECONDS,
        request_timeout: float | None = None,
    ) -> None:
        self._core = core
        self._raw = raw_call
        self._clock = wall_clock
        self._timeout = timeout_seconds
        self._orphaned_after = orphaned_after_seconds
        self._request_timeout = request_timeout

    async def acquire(self, node: str, namespace: str, name: str, budget: RetryBudget) -> LockResult:
        for _ in range(LOCK_ATTEMPTS):
            current = await self._read(node, budget)
            annotations = current.metadata.annotations or {}
            plugin = HAMI_REGISTER_ANNOTATION in annotations
            held = annotations.get(hami.NODE_LOCK)
            if held is not None:
                refusal = await self._refusal(node, held, namespace, name, plugin, budget)
                if refusal is None and _mine(held, namespace, name):
                    return LockResult(taken=True, hami_plugin=plugin)
                if refusal is not None:
                    return LockResult(taken=False, reason=refusal, hami_plugin=plugin)
            value = hami.format_node_lock(self._clock(), namespace, name)
            if await self._patch(node, {hami.NODE_LOCK: value}, current.metadata.resource_version, budget):
                return LockResult(taken=True, hami_plugin=plugin)
        return LockResult(
            taken=False, reason=f"node {node} changed {LOCK_ATTEMPTS} times while taking {hami.NODE_LOCK}"
        )

    async def release(self, node: str, namespace: str, name: str, budget: RetryBudget) -> bool:
        """Remove this pod's lock; False when there was none of this pod (released by HAMi, or another's)."""
        for _ in range(LOCK_ATTEMPTS):
            current = await self._read(node, budget)
            held = (current.metadata.annotations or {}).get(hami.NODE_LOCK)
            if held is None or not _mine(held, namespace, name):
                return False
            if await self._patch(node, {hami.NODE_LOCK: None}, current.metadata.resource_version, budget):
                return True
        return False

    async def _refusal(
        self, node: str, held: str, namespace: str, name: str, plugin: bool, budget: RetryBudget
    ) -> str | None:
        """Why a standing lock stops us; None when it is ours, expired, unreadable or orphaned (then replaced)."""
        try:
            lock = hami.parse_node_lock(held)
        except ValueError:
            log.warning("binder.hami_lock_unreadable", extra={"fields": {"node": node, "value": held}})
            return None
        now = self._clock()
        if lock.held_by(namespace, name) or lock.expired(now, self._timeout):
            return None
        if lock.name:
            holder = await self._holder(lock.namespace, lock.name, budget)
            orphaned = holder is None or (
                now - lock.taken_at > self._orphaned_after and (not plugin or holder.spec.node_name != node)
            )
            if orphaned:
                log.info(
                    "binder.hami_lock_orphaned",
                    extra={"fields": {"node": node, "holder": f"{lock.namespace}/{lock.name}", "exists": bool(holder)}},
                )
                return None
        who = f"{lock.namespace}/{lock.name}" if lock.name else "another scheduler"
        age = max(0, int(now - lock.taken_at))
        return f"node {node} is locked by {who} ({hami.NODE_LOCK}, taken {age}s ago; HAMi's device plugin releases it)"

    async def _holder(self, namespace: str, name: str, budget: RetryBudget) -> PodObject | None:
        """The pod a lock names; None when there is none."""
        try:
            body = await self._call("read lock holder", self._core.read_namespaced_pod, name, namespace, budget=budget)
        except ApiException as exc:
            if classify_status(int(exc.status or 0)) is ApiErrorKind.NOT_FOUND:
                return None
            raise
        return _pod_decoder.decode(body)

    async def _read(self, node: str, budget: RetryBudget) -> NodeObject:
        body = await self._call("read node", self._core.read_node, node, budget=budget)
        return _node_decoder.decode(body)

    async def _patch(
        self, node: str, annotations: dict[str, str | None], resource_version: str, budget: RetryBudget
    ) -> bool:
        """False when the Node changed since it was read (409 on the precondition)."""
        body = {"metadata": {"annotations": annotations, "resourceVersion": resource_version}}
        try:
            await self._call(
                "patch node",
                self._core.patch_node,
                node,
                body,
                budget=budget,
                _content_type=MERGE_PATCH,  # the runtime takes it; the stub lacks it
            )
        except ApiException as exc:
            if classify_status(int(exc.status or 0)) is ApiErrorKind.CONFLICT:
                return False
            raise
        return True

    async def _call(
        self, operation: str, method: Callable[..., Awaitable[Any]], *args: Any, budget: RetryBudget, **options: Any
    ) -> bytes:
        """One API call, raw bytes back, retried within the budget."""
        call = functools.partial(
            method, *args, _preload_content=False, _request_timeout=self._request_timeout, **options
        )
        return await call_with_retry(operation, functools.partial(self._raw, call), budget)


def _mine(held: str, namespace: str, name: str) -> bool:
    try:
        return hami.parse_node_lock(held).held_by(namespace, name)
    except ValueError:
        return False
