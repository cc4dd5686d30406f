"""List, then watch, one kind of API object, and keep a pure view current with it.

Informer-style: a full list is handed over (`on_list`), then a watch runs
from the list's resourceVersion and hands over each change (`on_event`);
each new watch resumes from the last version seen (bookmarks included). A
410 Gone (the version left the server's window) or any failure of the stream
leads to a new list after a backoff, and the view reconciles from it, so a
change missed while disconnected is never missed for good.

The replies are read raw (`_preload_content=False`) and decoded with msgspec
into the binder's own Structs: no kubernetes-asyncio models per object.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import aiohttp
import msgspec

from services.binder import metrics
from services.binder.kube_objects import ApiStatus, ObjectList, WatchEvent, status_message

log = logging.getLogger(__name__)

T = TypeVar("T", bound=msgspec.Struct)
ListCall = Callable[..., Awaitable[Any]]  # a kubernetes-asyncio list_* method

_event_decoder = msgspec.json.Decoder(WatchEvent)
_list_decoder = msgspec.json.Decoder(ObjectList)


class _Expired(Exception):
    """The watch's resourceVersion is too old: list again."""


class _StreamFailed(Exception):
    pass


class _NotServed(Exception):
    """The server does not serve the resource (404 on the list): an optional API group."""


LIST_TIMEOUT_SECONDS = 30.0


class ApiWatch(Generic[T]):
    def __init__(
        self,
        resource: str,
        list_call: ListCall,
        object_type: type[T],
        *,
        on_list: Callable[[list[T]], None],
        on_event: Callable[[str, T], None],
        watch_seconds: int = 300,
        retry_base_seconds: float = 0.2,
        retry_cap_seconds: float = 10.0,
        not_served_retry_seconds: float | None = None,
    ) -> None:
        """`not_served_retry_seconds`: the resource is optional (an API group the cluster may lack): a
        404 on the list hands over an empty list, and the list is tried again after that long."""
        self.resource = resource
        self._list_call = list_call
        self._decoder = msgspec.json.Decoder(object_type)
        self._on_list = on_list
        self._on_event = on_event
        self._watch_seconds = watch_seconds
        self._retry_base = retry_base_seconds
        self._retry_cap = retry_cap_seconds
        self._not_served_retry = not_served_retry_seconds
        self.synced = asyncio.Event()  # set once the first list was handed over

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                version = await self._list()
                failures = 0
                while True:
                    version = await self._watch(version)
                    failures = 0
            except _NotServed:
                assert self._not_served_retry is not None
                await asyncio.sleep(self._not_served_retry)
            except (_Expired, _StreamFailed, aiohttp.ClientError, OSError, TimeoutError, msgspec.DecodeError) as exc:
                metrics.WATCH_RESTARTS.labels(resource=self.resource).inc()
                if isinstance(exc, _Expired):
                    log.info("binder.watch_expired", extra={"fields": {"resource": self.resource}})
                    continue  # list again at once: nothing is wrong with the server
                # Full jitter, so several binders do not come back together on a recovering server.
                delay = random.random() * min(self._retry_cap, self._retry_base * 2.0**failures)
                failures += 1
                log.warning(
                    "binder.watch_failed",
                    extra={"fields": {"resource": self.resource, "error": repr(exc), "retry_in": round(delay, 3)}},
                )
                await asyncio.sleep(delay)

    async def _list(self) -> str:
        # A list that hangs (a server that never answers) must end, or the watch never resumes.
        reply = await self._list_call(_preload_content=False, _request_timeout=LIST_TIMEOUT_SECONDS)
        try:
            body = await reply.read()
        finally:
            reply.release()
        if reply.status == 404 and self._not_served_retry is not None:
            self._on_list([])
            self.synced.set()
            log.info("binder.watch_not_served", extra={"fields": {"resource": self.resource}})
            raise _NotServed()
        if reply.status != 200:
            raise _StreamFailed(f"list {self.resource}: {status_message(body, reply.status)}")
        listing = _list_decoder.decode(body)
        self._on_list([obj for raw in listing.items if (obj := self._decode(raw)) is not None])
        self.synced.set()
        return listing.metadata.resource_version

    async def _watch(self, version: str) -> str:
        """One watch request until the server ends it; returns the last version seen."""
        reply = await self._list_call(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_seconds,
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=None, sock_read=self._watch_seconds + 30),
        )
        try:
            if reply.status == 410:
                raise _Expired()
            if reply.status != 200:
                raise _StreamFailed(f"watch {self.resource}: {status_message(await reply.read(), reply.status)}")
            pending = b""
            async for chunk in reply.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        version = self._handle_line(line, version)
            return version
        finally:
            reply.release()

    def _handle_line(self, line: bytes, version: str) -> str:
        event = _event_decoder.decode(line)
        if event.type == "ERROR":
            status = msgspec.json.decode(event.object, type=ApiStatus)
            if status.code == 410:
                raise _Expired()
            raise _StreamFailed(f"watch {self.resource}: {status.code} {status.reason}: {status.message}")
        if event.type == "BOOKMARK":
            return _version_of(event.object) or version
        obj = self._decode(event.object)
        if obj is not None:
            self._on_event(event.type, obj)
        return _version_of(event.object) or version

    def _decode(self, raw: msgspec.Raw) -> T | None:
        try:
            return self._decoder.decode(raw)
        except msgspec.ValidationError as exc:
            # One malformed object must not stop the view: skipped, logged, counted.
            metrics.WATCH_BAD_OBJECTS.labels(resource=self.resource).inc()
            log.warning("binder.watch_bad_object", extra={"fields": {"resource": self.resource, "error": str(exc)}})
            return None


class _Versioned(msgspec.Struct):
    metadata: dict[str, Any] = {}


_versioned_decoder = msgspec.json.Decoder(_Versioned)


def _version_of(raw: msgspec.Raw) -> str:
    version = _versioned_decoder.decode(raw).metadata.get("resourceVersion", "")
    return version if isinstance(version, str) else ""
