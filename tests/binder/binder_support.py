"""Helpers of the binder tests: a fault-injecting proxy for the API server, placements, a recording producer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import ClientSession, web
from decision_keys import TEST_KEY
from kubernetes_asyncio import client
from opentelemetry import trace

from schemas.events import DeviceAssignment, PlacementEvent, PlacementOutcome
from schemas.topics import Topic
from schemas.topology import Device, Vendor
from services.binder.cluster_view import ClusterView
from services.binder.ledger import DeviceLedger
from services.binder.service import watch_cluster


class Fault(msgspec.Struct, kw_only=True):
    method: str
    path_suffix: str
    status: int
    times: int
    forward_first: bool = False  # the server does the work, the client sees the error (a lost reply)


class Seen(msgspec.Struct, frozen=True, kw_only=True):
    method: str
    path: str
    status: int


class FaultProxy:
    """Forwards every request to the API server, except the failures a test asks for.

    `log` lists what the client sent and what it got back, in order; `before`
    hooks run before a matching request is forwarded (to change the cluster
    between two of the binder's calls).
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.url = ""
        self.log: list[Seen] = []
        self._faults: list[Fault] = []
        self._before: list[tuple[str, str, Callable[[], object]]] = []
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None

    def fail(self, method: str, path_suffix: str, status: int, times: int = 1, *, forward_first: bool = False) -> None:
        self._faults.append(
            Fault(
                method=method,
                path_suffix=path_suffix,
                status=status,
                times=times,
                forward_first=forward_first,
            )
        )

    def before(self, method: str, path_suffix: str, hook: Callable[[], object]) -> None:
        """Run `hook` once, right before the first matching request is forwarded."""
        self._before.append((method, path_suffix, hook))

    def calls(self, method: str, path_suffix: str) -> list[Seen]:
        return [s for s in self.log if s.method == method and s.path.endswith(path_suffix)]

    async def start(self) -> str:
        self._session = ClientSession()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _fault_for(self, request: web.Request) -> Fault | None:
        for fault in self._faults:
            if fault.times > 0 and fault.method == request.method and request.path.endswith(fault.path_suffix):
                fault.times -= 1
                return fault
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        for i, (method, suffix, hook) in enumerate(self._before):
            if method == request.method and request.path.endswith(suffix):
                del self._before[i]
                hook()
                break
        fault = self._fault_for(request)
        if fault is not None and not fault.forward_first:
            return self._error(request, fault.status)
        assert self._session is not None
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            data=await request.read(),
            headers={k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")},
        ) as upstream:
            body = await upstream.read()
            if fault is not None:
                return self._error(request, fault.status)
            self.log.append(Seen(method=request.method, path=request.path, status=upstream.status))
            return web.Response(body=body, status=upstream.status, content_type=upstream.content_type)

    def _error(self, request: web.Request, status: int) -> web.Response:
        self.log.append(Seen(method=request.method, path=request.path, status=status))
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": "injected",
            "code": status,
        }
        headers = {"Retry-After": "1"} if status == 429 else {}
        return web.json_response(body, status=status, headers=headers)


def placement_for(
    pod: dict[str, Any],
    node: str,
    devices: tuple[DeviceAssignment, ...] = (DeviceAssignment(index=0),),
    **changes: Any,
) -> PlacementEvent:
    meta = pod["metadata"]
    fields: dict[str, Any] = {
        "decision_id": f"d-{uuid.uuid4().hex[:8]}",
        "uid": meta["uid"],
        "namespace": meta["namespace"],
        "name": meta["name"],
        "pod_resource_version": meta["resourceVersion"],
        "outcome": PlacementOutcome.PLACED,
        "node": node,
        "devices": devices,
    }
    fields.update(changes)
    return PlacementEvent(**fields)


PodFactory = Callable[..., dict[str, Any]]


def gpus(count: int) -> tuple[Device, ...]:
    """A node's published topology: `count` GPUs, device i named GPU-i."""
    return tuple(
        Device(index=i, uuid=f"GPU-{i}", vendor=Vendor.NVIDIA, model="H100", memory_mib=80_000) for i in range(count)
    )


class Sent(msgspec.Struct, frozen=True, kw_only=True):
    topic: str
    key: str | None
    event: Any
    span_id: int  # the span current when it was sent (0 = none)
    trace_id: int


class RecordingProducer:
    """Stands in for EventProducer: records what would be sent and under which span."""

    def __init__(self, on_send: Callable[[], Awaitable[None]] | None = None) -> None:
        self.sent: list[Sent] = []
        self._on_send = on_send

    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None:
        if self._on_send is not None:
            await self._on_send()
        ctx = trace.get_current_span().get_span_context()
        name = topic if isinstance(topic, str) else topic.name
        self.sent.append(Sent(topic=name, key=key, event=event, span_id=ctx.span_id, trace_id=ctx.trace_id))


class WatchedCluster:
    """The binder's view of the test API server and its ledger, fed by the binder's own watches."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.cluster = ClusterView(decision_key=TEST_KEY)
        self.ledger = DeviceLedger(pod_gone=self.cluster.knows_gone, pod_bound_on=self.cluster.bound_on)
        self._applied = asyncio.Event()
        self.watches = watch_cluster(core, self.cluster, self.ledger, applied=self._applied.set)
        self._tasks = [asyncio.create_task(w.run()) for w in self.watches]

    async def synced(self) -> None:
        await self.until(lambda: self.cluster.pods_synced and self.cluster.nodes_synced)

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until the watches have applied what makes `condition` true (checked after each change)."""

        async def wait() -> None:
            while not condition():
                self._applied.clear()
                await self._applied.wait()

        await asyncio.wait_for(wait(), 10)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
