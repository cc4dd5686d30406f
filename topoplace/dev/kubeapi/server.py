"""The HTTP face of the store: the URL paths and query parameters kubernetes-asyncio uses."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from aiohttp import web

from topoplace.dev.kubeapi import discovery, fieldcheck, media, resources
from topoplace.dev.kubeapi.changes import Change, Subscription
from topoplace.dev.kubeapi.controllers import GarbageCollector, ResourceClaimController
from topoplace.dev.kubeapi.errors import ApiError, bad_request, success_status
from topoplace.dev.kubeapi.faults import FaultInjector, FaultPlan, FaultReport
from topoplace.dev.kubeapi.openapi import OpenApiV3
from topoplace.dev.kubeapi.resources import ResourceType
from topoplace.dev.kubeapi.selectors import Selector, parse_selector
from topoplace.dev.kubeapi.store import ObjectStore
from topoplace.dev.kubeapi.tables import TablePrinter
from topoplace.dev.kubeapi.views import View, WatchEvents, table_printer, table_response
from topoplace.dev.kubeapi.volumes import VolumeProvisioner

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()
_TRUE = ("true", "True", "1")
_WARNINGS = web.RequestKey("warnings", list[str])  # the Warning headers of the answer (fieldValidation=Warn)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encoder.encode(body), status=status, content_type="application/json")


async def _read_body(request: web.Request, rtype: ResourceType | None = None) -> Any:
    """The JSON body; for a write of `rtype`, checked as its `fieldValidation` directive asks."""
    raw = await request.read()
    if rtype is not None:
        request[_WARNINGS] = fieldcheck.check(rtype, request.query.get("fieldValidation", ""), raw)
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


@web.middleware
async def _status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as a Kubernetes Status object, as clients expect."""
    try:
        if request.query.get("dryRun") and request.method in ("POST", "PUT", "PATCH", "DELETE"):
            # not supported: refusing beats writing for real what the client meant to try
            raise bad_request("dryRun is not supported by this server")
        resp = await handler(request)
        for warning in request.get(_WARNINGS, ()):
            resp.headers.add("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
        return resp
    except ApiError as exc:
        return _json(exc.status(), exc.code)
    except web.HTTPNotFound:
        return _json(ApiError(404, "NotFound", "the server could not find the requested resource").status(), 404)
    except web.HTTPMethodNotAllowed:
        err = ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return _json(err.status(), 405)


class KubeApiServer:
    """A small Kubernetes API server for tests and demos (see docs/kube-api.md for its limits)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        store: ObjectStore | None = None,
        bookmark_interval: float = 10.0,
        served: Sequence[ResourceType] = resources.ALL,
        faults: FaultPlan | None = None,
        claim_controller: bool = True,
        garbage_collector: bool = True,
        volume_provisioner: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.store = store or ObjectStore()
        self.bookmark_interval = bookmark_interval
        self.served = tuple(served)  # a subset answers 404 for the rest, like a cluster without a CRD
        # what kube-controller-manager would do on a real cluster
        if garbage_collector:
            GarbageCollector().install(self.store)
        if claim_controller:
            ResourceClaimController().install(self.store)
        if volume_provisioner:  # a CSI provisioner and the PersistentVolume controller (volumes.py)
            VolumeProvisioner().install(self.store)
        self.faults = FaultInjector(faults) if faults is not None else None
        self._runner: web.AppRunner | None = None
        self.url = ""

    def fault_report(self) -> FaultReport:
        """Requests the fault plan considered and the faults it injected, by kind (zeros without a plan)."""
        if self.faults is None:
            return FaultInjector(FaultPlan()).report()
        return self.faults.report()

    async def __aenter__(self) -> KubeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> str:
        middlewares = [_status_errors] if self.faults is None else [self.faults.middleware, _status_errors]
        # The real API server takes request bodies up to 3 MiB (its MaxRequestBodyBytes); aiohttp's default is 1 MiB.
        app = web.Application(middlewares=middlewares, client_max_size=3 * 1024 * 1024)
        self._add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.host}:{port}"
        return self.url

    async def stop(self) -> None:
        self.store.close_watches()  # lets open watch streams end before the runner waits on them
        if self.faults is not None:
            self.faults.stop()  # ends hanging `timeout` faults
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- routing --------------------------------------------------------------------------------

    def _add_routes(self, app: web.Application) -> None:
        r = app.router
        discovery.add_routes(r, self.served)
        OpenApiV3(self.served).add_routes(r)
        r.add_get("/healthz", self._ok)
        r.add_get("/readyz", self._ok)
        r.add_get("/livez", self._ok)
        r.add_get("/debug/faults", self._debug_faults)
        for rtype in self.served:
            for version in rtype.versions:
                self._add_resource_routes(r, View(rtype, version))
        if resources.PODS in self.served:
            r.add_post("/api/v1/namespaces/{namespace}/pods/{name}/binding", self._bind)
            r.add_post("/api/v1/namespaces/{namespace}/bindings", self._bind)

    def _add_resource_routes(self, r: web.UrlDispatcher, view: View) -> None:
        on, rtype = functools.partial, view.rtype
        base = rtype.base_path_of(view.version)
        if rtype.namespaced:
            r.add_get(f"{base}/{rtype.plural}", on(self._collection_get, view, False))
            coll = f"{base}/namespaces/{{namespace}}/{rtype.plural}"
        else:
            coll = f"{base}/{rtype.plural}"
        item = coll + "/{name}"
        r.add_get(coll, on(self._collection_get, view, rtype.namespaced))
        r.add_post(coll, on(self._create, view))
        r.add_delete(coll, on(self._delete_collection, view))
        r.add_get(item, on(self._get, view))
        r.add_put(item, on(self._replace, view, False))
        r.add_patch(item, on(self._patch, view, False))
        r.add_delete(item, on(self._delete, view))
        if rtype.has_status:
            r.add_get(item + "/status", on(self._get, view))
            r.add_put(item + "/status", on(self._replace, view, True))
            r.add_patch(item + "/status", on(self._patch, view, True))

    async def _debug_faults(self, request: web.Request) -> web.Response:
        report = self.fault_report()
        plan = self.faults.plan if self.faults is not None else None
        return _json({"plan": plan, "considered": report.considered, "injected": report.injected})

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    # --- handlers -------------------------------------------------------------------------------

    @staticmethod
    def _namespace(request: web.Request, rtype: ResourceType) -> str | None:
        return request.match_info.get("namespace") if rtype.namespaced else None

    async def _create(self, view: View, request: web.Request) -> web.Response:
        body = await _read_body(request, view.rtype)
        obj = self.store.create(view.rtype, body, namespace=self._namespace(request, view.rtype))
        return _json(view.out(obj), 201)

    async def _get(self, view: View, request: web.Request) -> web.Response:
        printer = table_printer(view, request)
        obj = self.store.get(view.rtype, request.match_info["name"], self._namespace(request, view.rtype))
        if printer is not None:
            return table_response(printer, [view.out(obj)], obj["metadata"]["resourceVersion"])
        return _json(view.out(obj))

    async def _replace(self, view: View, status_only: bool, request: web.Request) -> web.Response:
        obj = self.store.replace(
            view.rtype,
            request.match_info["name"],
            await _read_body(request, view.rtype),
            namespace=self._namespace(request, view.rtype),
            status_only=status_only,
        )
        return _json(view.out(obj))

    async def _patch(self, view: View, status_only: bool, request: web.Request) -> web.Response:
        obj = self.store.patch(
            view.rtype,
            request.match_info["name"],
            request.headers.get("Content-Type", ""),
            await _read_body(request, view.rtype),
            namespace=self._namespace(request, view.rtype),
            status_only=status_only,
        )
        return _json(view.out(obj))

    async def _delete(self, view: View, request: web.Request) -> web.Response:
        rtype = view.rtype
        options = await _read_body(request) if (request.can_read_body and await request.read()) else {}
        preconditions = options.get("preconditions") if isinstance(options, dict) else None
        uid = preconditions.get("uid") if isinstance(preconditions, dict) else None
        namespace = self._namespace(request, rtype)
        obj = self.store.delete(rtype, request.match_info["name"], namespace=namespace, uid=uid)
        if rtype is resources.NODES:
            # the real server answers a node deletion with a Status, other kinds with the object
            body = success_status(200)
            body["details"] = {"name": obj["metadata"]["name"], "kind": "nodes", "uid": obj["metadata"]["uid"]}
            return _json(body)
        return _json(view.out(obj))

    async def _delete_collection(self, view: View, request: web.Request) -> web.Response:
        selector = self._selector(view.rtype, request)
        deleted = self.store.delete_collection(view.rtype, self._namespace(request, view.rtype), selector)
        return _json(view.list_body(deleted, self.store.revision))

    async def _bind(self, request: web.Request) -> web.Response:
        body = await _read_body(request)
        name = request.match_info.get("name") or (
            (body.get("metadata") or {}).get("name") if isinstance(body, dict) else ""
        )
        if not name:
            raise bad_request("the Binding must name the pod in metadata.name")
        self.store.bind(request.match_info["namespace"], name, body)
        # the real server answers 201 with a Status, not the Binding
        return _json(success_status(201), 201)

    def _selector(self, rtype: ResourceType, request: web.Request) -> Selector:
        q = request.query
        return parse_selector(q.get("labelSelector", ""), q.get("fieldSelector", ""), rtype.field_labels)

    async def _collection_get(self, view: View, in_namespace: bool, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"] if in_namespace else None
        selector = self._selector(view.rtype, request)
        printer = table_printer(view, request)
        if request.query.get("watch") in _TRUE:
            return await self._watch(view, namespace, selector, request, printer)
        items, revision = self.store.list(view.rtype, namespace, selector)
        if printer is not None:
            return table_response(printer, [view.out(o) for o in items], str(revision))
        return _json(view.list_body(items, revision))

    # --- watch ----------------------------------------------------------------------------------

    async def _watch(
        self, view: View, namespace: str | None, selector: Selector, request: web.Request, printer: TablePrinter | None
    ) -> web.StreamResponse:
        q = request.query
        since = _parse_revision(q.get("resourceVersion", ""))
        timeout = _parse_seconds(q.get("timeoutSeconds", ""))
        bookmarks = q.get("allowWatchBookmarks") in _TRUE
        content_type = media.content_type(printer.variant) if printer is not None else media.JSON
        resp = web.StreamResponse(status=200, headers={"Content-Type": content_type})
        resp.enable_chunked_encoding()
        try:
            initial, sub = self.store.subscribe(view.rtype, namespace, since)
        except ApiError as exc:
            # a too-old resourceVersion is reported inside the stream, as the real server does
            await resp.prepare(request)
            await resp.write(_encoder.encode({"type": "ERROR", "object": exc.status()}) + b"\n")
            await resp.write_eof()
            return resp
        try:
            await resp.prepare(request)
            await self._stream(resp, WatchEvents(view, selector, printer), initial, sub, timeout, bookmarks)
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client went away; nothing to clean up but the subscription
        finally:
            self.store.unsubscribe(sub)
        return resp

    async def _stream(
        self,
        resp: web.StreamResponse,
        events: WatchEvents,
        initial: list[Change],
        sub: Subscription,
        timeout: float | None,
        bookmarks: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        view = events.view
        await events.write(resp, initial)
        while not (sub.closed or sub.overflowed):
            sub.wakeup.clear()
            if sub.pending:
                batch = list(sub.pending)
                sub.pending.clear()
                await events.write(resp, batch)
                continue
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return
            wait = remaining
            if bookmarks:
                wait = self.bookmark_interval if wait is None else min(wait, self.bookmark_interval)
            try:
                await asyncio.wait_for(sub.wakeup.wait(), wait)
            except TimeoutError:
                if bookmarks and not sub.pending:
                    # nothing is queued, so every change up to the current revision was delivered
                    mark = {
                        "kind": view.rtype.kind,
                        "apiVersion": view.api_version,
                        "metadata": {"resourceVersion": str(self.store.revision)},
                    }
                    await resp.write(_encoder.encode({"type": "BOOKMARK", "object": mark}) + b"\n")


def _parse_revision(text: str) -> int | None:
    """None = start from the current state ("" or "0": any version, as the real server reads them)."""
    if text in ("", "0"):
        return None
    try:
        return int(text)
    except ValueError:
        raise bad_request(f'invalid resource version "{text}"') from None


def _parse_seconds(text: str) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise bad_request(f'timeoutSeconds: invalid value "{text}"') from None
