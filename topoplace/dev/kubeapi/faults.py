"""Fault injection for chaos tests: a seeded fraction of API requests fails the way a real server or
network does.

Kinds: `429` (a Status with Retry-After), `500`, `503` (Status objects), `timeout` (no answer until
the client gives up), `reset` (the connection is dropped unanswered), `lost` (the request is carried
out, then the connection is dropped before the answer: "applied but the reply was lost").
A watch request drawn for a fault is answered 500 before its stream starts; an open stream is never cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
from collections.abc import Awaitable, Callable

import msgspec
from aiohttp import web

from topoplace.dev.kubeapi.errors import ApiError

KINDS: tuple[str, ...] = ("429", "500", "503", "timeout", "reset", "lost")
VERBS: tuple[str, ...] = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
_TRUE = ("true", "True", "1")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FaultPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Which requests fail and how. Deterministic for a seed, given the same requests in the same order."""

    rate: float = 0.0  # the fraction of the requests considered that fail
    seed: int = 0
    kinds: tuple[str, ...] = KINDS  # drawn uniformly among these
    verbs: tuple[str, ...] = VERBS  # the requests considered
    retry_after_seconds: int = 1  # the Retry-After of a 429
    hang_seconds: float = 300.0  # a `timeout` answers nothing for this long (or until the server stops)

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate: {self.rate} is not between 0 and 1")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"fault kinds: {unknown or 'none given'}; known: {', '.join(KINDS)}")
        unknown = [v for v in self.verbs if v not in VERBS]
        if unknown or not self.verbs:
            raise ValueError(f"fault verbs: {unknown or 'none given'}; known: {', '.join(VERBS)}")
        if self.retry_after_seconds < 0 or self.hang_seconds <= 0:
            raise ValueError("fault retry_after_seconds must be >= 0 and hang_seconds > 0")


class FaultReport(msgspec.Struct, frozen=True, kw_only=True):
    considered: int  # requests the plan applied to (its verbs, API paths)
    injected: dict[str, int]  # faults by kind

    @property
    def total(self) -> int:
        return sum(self.injected.values())


def parse_kinds(text: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(",") if k.strip())


class FaultInjector:
    """Draws a fault (or none) per request and carries it out; counts what it injected."""

    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self._rng = random.Random(plan.seed)
        self._verbs = frozenset(plan.verbs)
        self._considered = 0
        self._injected = dict.fromkeys(KINDS, 0)
        self._stopping = asyncio.Event()

    def report(self) -> FaultReport:
        return FaultReport(considered=self._considered, injected=dict(self._injected))

    def draw(self, verb: str) -> str | None:
        if verb not in self._verbs:
            return None
        self._considered += 1
        if self._rng.random() >= self.plan.rate:
            return None
        kind = self._rng.choice(self.plan.kinds)
        if verb == "watch":
            kind = "500"  # a watch fails only before its stream starts
        self._injected[kind] += 1
        return kind

    def stop(self) -> None:
        """Ends every hanging `timeout` fault, so the server can shut down."""
        self._stopping.set()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.plan.rate <= 0 or not request.path.startswith(("/api/", "/apis/")):
            return await handler(request)
        kind = self.draw(_verb(request))
        if kind is None:
            return await handler(request)
        if kind in ("429", "500", "503"):
            return _status_reply(kind, self.plan.retry_after_seconds)
        if kind == "timeout":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.plan.hang_seconds)
        elif kind == "lost":
            await handler(request)  # the change is made; its reply is dropped below
        _drop_connection(request)
        # aiohttp finds the connection closed when it writes this and ends the request quietly
        return web.Response(status=204)


def _verb(request: web.Request) -> str:
    item = "name" in request.match_info
    method = request.method
    if method == "GET":
        if request.query.get("watch") in _TRUE:
            return "watch"
        return "get" if item else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if item else "deletecollection"
    return method.lower()


def _status_reply(kind: str, retry_after: int) -> web.Response:
    if kind == "429":
        err = ApiError(429, "TooManyRequests", "Too many requests, please try again later.")
        body = err.status()
        body["details"] = {"retryAfterSeconds": retry_after}
        headers = {"Retry-After": str(retry_after)}
    elif kind == "503":
        body = ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request").status()
        headers = {}
    else:
        body = ApiError(500, "InternalError", "Internal error occurred: injected fault").status()
        headers = {}
    return web.Response(
        body=msgspec.json.encode(body), status=body["code"], content_type="application/json", headers=headers
    )


def _drop_connection(request: web.Request) -> None:
    """Close the connection at once with a TCP reset (linger 0), as a failed network path does."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
