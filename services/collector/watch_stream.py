"""List + watch one resource type through kubernetes-asyncio, the way informers do.

List, hand the full set over, then watch from the list's resourceVersion;
resume each new watch from the last version seen (bookmarks included). A
410 Gone means the version left the server's window: list again and let the
handler reconcile. Every `resync_seconds` list again anyway. Transport errors
are retried with backoff; the loop ends only by cancellation, or with
ResourceMissing when the API does not serve the resource at all.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Counter

from services.collector.watch_objects import ObjectList, ObjectMeta

log = logging.getLogger(__name__)

RELISTS = Counter(
    "topoplace_cluster_watcher_relists_total", "Lists of a resource after the first", ["resource", "reason"]
)
BAD_OBJECTS = Counter("topoplace_cluster_watcher_bad_objects_total", "API objects that did not decode", ["resource"])
WATCH_ERRORS = Counter("topoplace_cluster_watcher_watch_errors_total", "Failed list or watch calls", ["resource"])

T = TypeVar("T", bound=msgspec.Struct)
ListFunction = Callable[..., Awaitable[Any]]
# Worth another try: transport failures, API errors, a reply that is not the JSON expected
# (a proxy's error page), and aiohttp's ValueError for a watch line over its buffer.
_TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError, ApiException, msgspec.DecodeError, ValueError)
_MAX_BACKOFF = 30.0
# A list that has not answered in this long is given up and tried again: without a bound, a
# request the server never answered held the resource unlisted (a whole relist of nodes
# unpublished after a broker restart, every pod unschedulable meanwhile).
LIST_TIMEOUT_SECONDS = 60.0


class _WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _Versioned(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


_event_decoder = msgspec.json.Decoder(_WatchEvent)
_versioned_decoder = msgspec.json.Decoder(_Versioned)


class ResourceMissing(Exception):
    """The API does not serve this resource (404 on list: e.g. a CRD that is not installed)."""


class ListWatch(Generic[T]):
    """One resource type: `list_fn` is a kubernetes-asyncio list method with its path arguments bound."""

    def __init__(
        self,
        resource: str,
        list_fn: ListFunction,
        object_type: type[T],
        *,
        on_list: Callable[[list[T], bool], Awaitable[None]],
        on_change: Callable[[str, T], Awaitable[None]],
        resync_seconds: float,
        field_selector: str = "",
        watch_timeout: float = 300.0,
        retry_delay: float = 0.5,
        list_timeout: float = LIST_TIMEOUT_SECONDS,
    ) -> None:
        self.resource = resource
        self._list_fn = list_fn
        self._decoder = msgspec.json.Decoder(object_type)
        self._on_list = on_list  # (every object, is this a resync) -> reconcile
        self._on_change = on_change  # (ADDED | MODIFIED | DELETED, object)
        self._resync = resync_seconds
        self._field_selector = field_selector
        self._watch_timeout = watch_timeout
        self._retry_delay = retry_delay
        self._list_timeout = list_timeout
        self.listed = asyncio.Event()  # set once the first list was handed over
        self.lists = 0

    def _selector(self) -> dict[str, str]:
        return {"field_selector": self._field_selector} if self._field_selector else {}

    async def run(self) -> None:
        delay = self._retry_delay
        reason = "start"
        while True:
            try:
                version = await self._list(resync=reason == "resync")
            except _TRANSIENT as exc:
                delay = await self._backoff("list", exc, delay)
                continue
            delay = self._retry_delay
            reason = await self._watch_until_relist(version)
            RELISTS.labels(resource=self.resource, reason=reason).inc()
            log.info("collector.relist", extra={"fields": {"resource": self.resource, "reason": reason}})

    async def _list(self, *, resync: bool) -> str:
        resp = await self._list_fn(
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=self._list_timeout),
            **self._selector(),
        )
        try:
            body = await resp.read()
        finally:
            resp.release()
        if resp.status == 404:
            raise ResourceMissing(self.resource)
        if resp.status >= 400:
            raise ApiException(status=resp.status, reason=body.decode("utf-8", "replace")[:500])
        listing = msgspec.json.decode(body, type=ObjectList)
        objects = [obj for raw in listing.items if (obj := self._decode_raw(raw)) is not None]
        await self._on_list(objects, resync)
        self.lists += 1
        self.listed.set()
        return listing.metadata.resource_version

    async def _watch_until_relist(self, version: str) -> str:
        """Watch from `version` until a resync is due ("resync") or the version expired ("expired")."""
        deadline = time.monotonic() + self._resync
        delay = self._retry_delay
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "resync"
            try:
                version, expired = await self._watch_once(version, remaining)
            except _TRANSIENT as exc:
                delay = await self._backoff("watch", exc, delay)
                continue
            if expired:
                return "expired"
            delay = self._retry_delay

    async def _watch_once(self, version: str, remaining: float) -> tuple[str, bool]:
        """One watch request, read line by line; returns the last version seen and whether it expired.

        The lines are decoded here with msgspec rather than by kubernetes-asyncio's
        Watch, which builds an ApiClient per instance (about 0.1 s) and a model per event.
        """
        timeout = max(1, math.ceil(min(remaining, self._watch_timeout)))
        resp = await self._list_fn(
            watch=True,
            resource_version=version,
            timeout_seconds=timeout,
            allow_watch_bookmarks=True,
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=timeout + 30),
            **self._selector(),
        )
        try:
            if resp.status == 410:
                return version, True
            if resp.status >= 400:
                body = await resp.read()
                raise ApiException(status=resp.status, reason=body.decode("utf-8", "replace")[:500])
            deadline = time.monotonic() + remaining
            async for line in resp.content:
                if not line.strip():
                    continue
                try:
                    event = _event_decoder.decode(line)
                except msgspec.DecodeError as exc:
                    self._bad("?", exc)
                    continue
                if event.type == "ERROR":
                    status = msgspec.json.decode(event.object, type=_Status)
                    if status.code == 410:
                        return version, True
                    raise ApiException(status=status.code, reason=f"{status.reason}: {status.message}")
                version = _versioned_decoder.decode(event.object).metadata.resource_version or version
                if event.type in ("ADDED", "MODIFIED", "DELETED"):
                    obj = self._decode_raw(event.object)
                    if obj is not None:
                        await self._on_change(event.type, obj)
                if time.monotonic() >= deadline:
                    break  # a resync is due; a busy stream would otherwise run to its timeout
            return version, False
        finally:
            resp.release()

    def _decode_raw(self, raw: msgspec.Raw) -> T | None:
        try:
            return self._decoder.decode(raw)
        except msgspec.ValidationError as exc:
            try:
                name = _versioned_decoder.decode(raw).metadata.name
            except msgspec.ValidationError:
                name = "?"
            self._bad(name, exc)
            return None

    def _bad(self, name: str, exc: Exception) -> None:
        BAD_OBJECTS.labels(resource=self.resource).inc()
        log.warning(
            "collector.bad_object", extra={"fields": {"resource": self.resource, "name": name, "error": str(exc)}}
        )

    async def _backoff(self, call: str, exc: BaseException, delay: float) -> float:
        WATCH_ERRORS.labels(resource=self.resource).inc()
        log.warning(
            "collector.api_error",
            extra={
                "fields": {
                    "resource": self.resource,
                    "call": call,
                    "error": f"{type(exc).__name__}: {exc}",
                    "retry_in": delay,
                }
            },
        )
        await asyncio.sleep(delay)  # backoff against a failing API server, not synchronisation
        return min(delay * 2, _MAX_BACKOFF)
