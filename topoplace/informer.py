"""List + watch one kind of API object, the way informers do: the one loop every service uses.

List, hand the full set over (`on_list`), then watch from the list's resourceVersion and
hand over each change (`on_change`); each new watch resumes from the last version seen
(bookmarks included). A 410 Gone (the version left the server's window) means: list
again and let the handler reconcile. Every `resync_seconds` list again anyway, so a
change missed for any reason is never missed for good. A list that does not answer within
`list_timeout` is given up and tried again (a request the server never answered once held
a resource unlisted). Failures are retried with full-jitter backoff, so replicas do not
come back together on a recovering server. The loop ends only by cancellation, or with
ResourceMissing when the API does not serve the resource and it is not optional.

The replies are read raw (`_preload_content=False`) and decoded with msgspec
(topoplace.kube_codec) into the caller's Structs: no kubernetes-asyncio model per object.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Counter

from topoplace.kube_codec import ApiStatus, ObjectList, Versioned, WatchEvent, status_message

log = logging.getLogger(__name__)

T = TypeVar("T", bound=msgspec.Struct)
ListFunction = Callable[..., Awaitable[Any]]  # a kubernetes-asyncio list_* method, path arguments bound
# Worth another try: transport failures, API errors, a reply that is not the JSON expected
# (a proxy's error page), and aiohttp's ValueError for a watch line over its buffer.
TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError, ApiException, msgspec.DecodeError, ValueError)
LIST_TIMEOUT_SECONDS = 60.0
MAX_BACKOFF_SECONDS = 30.0

_event_decoder = msgspec.json.Decoder(WatchEvent)
_versioned_decoder = msgspec.json.Decoder(Versioned)


class ResourceMissing(Exception):
    """The API does not serve this resource (404 on list: e.g. a CRD that is not installed)."""


class InformerMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """The counters an informer adds to, each labelled by `resource`; the service names them."""

    relists: Counter  # also by `reason`: expired, resync
    bad_objects: Counter
    errors: Counter  # failed list or watch calls


class Informer(Generic[T]):
    """One resource type: `list_fn` is a kubernetes-asyncio list method with its path arguments bound."""

    def __init__(
        self,
        resource: str,
        list_fn: ListFunction,
        object_type: type[T],
        *,
        on_list: Callable[[list[T], bool], Awaitable[None]],
        on_change: Callable[[str, T], Awaitable[None]],
        metrics: InformerMetrics,
        resync_seconds: float = 300.0,
        field_selector: str = "",
        watch_timeout: float = 300.0,
        retry_delay: float = 0.5,
        list_timeout: float = LIST_TIMEOUT_SECONDS,
        not_served_retry_seconds: float | None = None,
    ) -> None:
        """`on_list(objects, resync)` reconciles from a full list; `on_change(ADDED | MODIFIED | DELETED, object)`.

        `not_served_retry_seconds`: the resource is optional (an API group the cluster may lack): a 404
        on the list hands over an empty list, and the list is tried again after that long."""
        self.resource = resource
        self._list_fn = list_fn
        self._decoder = msgspec.json.Decoder(object_type)
        self._on_list = on_list
        self._on_change = on_change
        self._metrics = metrics
        self._resync = resync_seconds
        self._field_selector = field_selector
        self._watch_timeout = watch_timeout
        self._retry_delay = retry_delay
        self._list_timeout = list_timeout
        self._not_served_retry = not_served_retry_seconds
        self.listed = asyncio.Event()  # set once the first list was handed over
        self.lists = 0
        self._failures = 0
        # Why the latest call to the API server failed; None once a list or a watch is answered again.
        self.failing: str | None = None

    def _selector(self) -> dict[str, str]:
        return {"field_selector": self._field_selector} if self._field_selector else {}

    async def run(self) -> None:
        reason = "start"
        while True:
            try:
                version = await self._list(resync=reason == "resync")
            except _NotServed:
                assert self._not_served_retry is not None
                await asyncio.sleep(self._not_served_retry)  # look again later: the API may be added
                continue
            except TRANSIENT as exc:
                await self._backoff("list", exc)
                continue
            self._failures = 0
            reason = await self._watch_until_relist(version)
            self._metrics.relists.labels(resource=self.resource, reason=reason).inc()
            log.info("informer.relist", extra={"fields": {"resource": self.resource, "reason": reason}})

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
            if self._not_served_retry is None:
                raise ResourceMissing(self.resource)
            self.failing = None  # answered: the resource is not served, which is allowed
            await self._handed_over([], resync)
            log.info("informer.not_served", extra={"fields": {"resource": self.resource}})
            raise _NotServed()
        if resp.status >= 400:
            raise ApiException(status=resp.status, reason=status_message(body, resp.status))
        self.failing = None
        listing = msgspec.json.decode(body, type=ObjectList)
        await self._handed_over([obj for raw in listing.items if (obj := self._decode(raw)) is not None], resync)
        return listing.metadata.resource_version

    async def _handed_over(self, objects: list[T], resync: bool) -> None:
        await self._on_list(objects, resync)
        self.lists += 1
        self.listed.set()

    async def _watch_until_relist(self, version: str) -> str:
        """Watch from `version` until a resync is due ("resync") or the version expired ("expired")."""
        deadline = time.monotonic() + self._resync
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "resync"
            try:
                version, expired = await self._watch_once(version, remaining)
            except TRANSIENT as exc:
                await self._backoff("watch", exc)
                continue
            if expired:
                return "expired"
            self._failures = 0

    async def _watch_once(self, version: str, remaining: float) -> tuple[str, bool]:
        """One watch request, read line by line; returns the last version seen and whether it expired."""
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
                raise ApiException(status=resp.status, reason=status_message(body, resp.status))
            self.failing = None
            deadline = time.monotonic() + remaining
            async for line in resp.content:
                if not line.strip():
                    continue
                version, expired = await self._handle_line(line, version)
                if expired:
                    return version, True
                if time.monotonic() >= deadline:
                    break  # a resync is due; a busy stream would otherwise run to its timeout
            return version, False
        finally:
            resp.release()

    async def _handle_line(self, line: bytes, version: str) -> tuple[str, bool]:
        """One watch event handed over; the version it brings and whether the watch expired."""
        try:
            event = _event_decoder.decode(line)
        except msgspec.DecodeError as exc:
            self._bad("?", exc)  # one unreadable line costs only itself
            return version, False
        if event.type == "ERROR":
            status = msgspec.json.decode(event.object, type=ApiStatus)
            if status.code == 410:
                return version, True
            raise ApiException(status=status.code, reason=f"{status.reason}: {status.message}")
        version = _versioned_decoder.decode(event.object).metadata.resource_version or version
        if event.type in ("ADDED", "MODIFIED", "DELETED"):
            obj = self._decode(event.object)
            if obj is not None:
                await self._on_change(event.type, obj)
        return version, False

    def _decode(self, raw: msgspec.Raw) -> T | None:
        try:
            return self._decoder.decode(raw)
        except msgspec.ValidationError as exc:
            # One malformed object must not stop the view: skipped, logged, counted.
            try:
                name = _versioned_decoder.decode(raw).metadata.name
            except msgspec.ValidationError:
                name = "?"
            self._bad(name, exc)
            return None

    def _bad(self, name: str, exc: Exception) -> None:
        self._metrics.bad_objects.labels(resource=self.resource).inc()
        log.warning(
            "informer.bad_object", extra={"fields": {"resource": self.resource, "name": name, "error": str(exc)}}
        )

    async def _backoff(self, call: str, exc: BaseException) -> None:
        self._metrics.errors.labels(resource=self.resource).inc()
        # Full jitter, so several replicas do not come back together on a recovering server.
        delay = random.random() * min(MAX_BACKOFF_SECONDS, self._retry_delay * 2.0**self._failures)
        self._failures += 1
        self.failing = f"{call} {self.resource}: {type(exc).__name__}: {exc}"
        log.warning(
            "informer.api_error",
            extra={
                "fields": {
                    "resource": self.resource,
                    "call": call,
                    "error": f"{type(exc).__name__}: {exc}",
                    "retry_in": round(delay, 3),
                }
            },
        )
        await asyncio.sleep(delay)  # backoff against a failing API server, not synchronisation


def api_server_unavailable(informers: Sequence[Informer[Any]]) -> Callable[[], str | None]:
    """For `ServiceRun.unavailable`: the API server, named, while an informer's latest call to it failed."""

    def unavailable() -> str | None:
        for informer in informers:
            if informer.failing is not None:
                return f"the API server: {informer.failing}"
        return None

    return unavailable


class _NotServed(Exception):
    """An optional resource the server does not serve: handed over as empty, tried again later."""
