"""The HTTP face of the store: the URL paths and query parameters kubernetes-asyncio uses."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from aiohttp import web

from topoplace.kubeapi import resources
from topoplace.kubeapi.errors import ApiError, bad_request, success_status
from topoplace.kubeapi.resources import ResourceType
from topoplace.kubeapi.selectors import Selector, parse_selector
from topoplace.kubeapi.store import Change, ObjectStore, Subscription, visible_change

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()
_TRUE = ("true", "True", "1")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encoder.encode(body), status=status, content_type="application/json")


async def _read_body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None


@web.middleware
async def _status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as a Kubernetes Status object, as clients expect."""
    try:
        return await handler(request)
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
    ) -> None:
        self.host = host
        self.port = port
        self.store = store or ObjectStore()
        self.bookmark_interval = bookmark_interval
        self.served = tuple(served)  # a subset answers 404 for the rest, like a cluster without a CRD
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> KubeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> str:
        app = web.Application(middlewares=[_status_errors])
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
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- routing --------------------------------------------------------------------------------

    def _add_routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/version", self._version)
        r.add_get("/healthz", self._ok)
        r.add_get("/readyz", self._ok)
        r.add_get("/livez", self._ok)
        for rtype in self.served:
            on = functools.partial
            if rtype.namespaced:
                r.add_get(f"{rtype.base_path}/{rtype.plural}", on(self._collection_get, rtype, False))
                coll = f"{rtype.base_path}/namespaces/{{namespace}}/{rtype.plural}"
            else:
                coll = f"{rtype.base_path}/{rtype.plural}"
            item = coll + "/{name}"
            r.add_get(coll, on(self._collection_get, rtype, rtype.namespaced))
            r.add_post(coll, on(self._create, rtype))
            r.add_delete(coll, on(self._delete_collection, rtype))
            r.add_get(item, on(self._get, rtype))
            r.add_put(item, on(self._replace, rtype, False))
            r.add_patch(item, on(self._patch, rtype, False))
            r.add_delete(item, on(self._delete, rtype))
            if rtype.has_status:
                r.add_get(item + "/status", on(self._get, rtype))
                r.add_put(item + "/status", on(self._replace, rtype, True))
                r.add_patch(item + "/status", on(self._patch, rtype, True))
        if resources.PODS in self.served:
            r.add_post("/api/v1/namespaces/{namespace}/pods/{name}/binding", self._bind)
            r.add_post("/api/v1/namespaces/{namespace}/bindings", self._bind)

    async def _version(self, request: web.Request) -> web.Response:
        return _json({"major": "1", "minor": "31", "gitVersion": "v1.31.0-topoplace", "platform": "linux/amd64"})

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    # --- handlers -------------------------------------------------------------------------------

    @staticmethod
    def _namespace(request: web.Request, rtype: ResourceType) -> str | None:
        return request.match_info.get("namespace") if rtype.namespaced else None

    async def _create(self, rtype: ResourceType, request: web.Request) -> web.Response:
        obj = self.store.create(rtype, await _read_body(request), namespace=self._namespace(request, rtype))
        return _json(obj, 201)

    async def _get(self, rtype: ResourceType, request: web.Request) -> web.Response:
        return _json(self.store.get(rtype, request.match_info["name"], self._namespace(request, rtype)))

    async def _replace(self, rtype: ResourceType, status_only: bool, request: web.Request) -> web.Response:
        obj = self.store.replace(
            rtype,
            request.match_info["name"],
            await _read_body(request),
            namespace=self._namespace(request, rtype),
            status_only=status_only,
        )
        return _json(obj)

    async def _patch(self, rtype: ResourceType, status_only: bool, request: web.Request) -> web.Response:
        obj = self.store.patch(
            rtype,
            request.match_info["name"],
            request.headers.get("Content-Type", ""),
            await _read_body(request),
            namespace=self._namespace(request, rtype),
            status_only=status_only,
        )
        return _json(obj)

    async def _delete(self, rtype: ResourceType, request: web.Request) -> web.Response:
        obj = self.store.delete(rtype, request.match_info["name"], namespace=self._namespace(request, rtype))
        if rtype is resources.NODES:
            # the real server answers a node deletion with a Status, other kinds with the object
            body = success_status(200)
            body["details"] = {"name": obj["metadata"]["name"], "kind": "nodes", "uid": obj["metadata"]["uid"]}
            return _json(body)
        return _json(obj)

    async def _delete_collection(self, rtype: ResourceType, request: web.Request) -> web.Response:
        selector = self._selector(rtype, request)
        deleted = self.store.delete_collection(rtype, self._namespace(request, rtype), selector)
        return _json(self._list_body(rtype, deleted, self.store.revision))

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

    @staticmethod
    def _list_body(rtype: ResourceType, items: list[dict[str, Any]], revision: int) -> dict[str, Any]:
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": str(revision)},
            "items": items,
        }

    async def _collection_get(
        self, rtype: ResourceType, in_namespace: bool, request: web.Request
    ) -> web.StreamResponse:
        namespace = request.match_info["namespace"] if in_namespace else None
        selector = self._selector(rtype, request)
        if request.query.get("watch") in _TRUE:
            return await self._watch(rtype, namespace, selector, request)
        items, revision = self.store.list(rtype, namespace, selector)
        return _json(self._list_body(rtype, items, revision))

    # --- watch ----------------------------------------------------------------------------------

    async def _watch(
        self, rtype: ResourceType, namespace: str | None, selector: Selector, request: web.Request
    ) -> web.StreamResponse:
        q = request.query
        since = _parse_revision(q.get("resourceVersion", ""))
        timeout = _parse_seconds(q.get("timeoutSeconds", ""))
        bookmarks = q.get("allowWatchBookmarks") in _TRUE
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        try:
            initial, sub = self.store.subscribe(rtype, namespace, since)
        except ApiError as exc:
            # a too-old resourceVersion is reported inside the stream, as the real server does
            await resp.prepare(request)
            await resp.write(_encoder.encode({"type": "ERROR", "object": exc.status()}) + b"\n")
            await resp.write_eof()
            return resp
        try:
            await resp.prepare(request)
            await self._stream(resp, rtype, selector, initial, sub, timeout, bookmarks)
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client went away; nothing to clean up but the subscription
        finally:
            self.store.unsubscribe(sub)
        return resp

    async def _stream(
        self,
        resp: web.StreamResponse,
        rtype: ResourceType,
        selector: Selector,
        initial: list[Change],
        sub: Subscription,
        timeout: float | None,
        bookmarks: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        await _write_changes(resp, initial, selector)
        while not (sub.closed or sub.overflowed):
            sub.wakeup.clear()
            if sub.pending:
                batch = list(sub.pending)
                sub.pending.clear()
                await _write_changes(resp, batch, selector)
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
                        "kind": rtype.kind,
                        "apiVersion": rtype.api_version,
                        "metadata": {"resourceVersion": str(self.store.revision)},
                    }
                    await resp.write(_encoder.encode({"type": "BOOKMARK", "object": mark}) + b"\n")


async def _write_changes(resp: web.StreamResponse, changes: list[Change], selector: Selector) -> None:
    lines: list[bytes] = []
    for change in changes:
        kind = visible_change(change, selector)
        if kind is not None:
            lines.append(b'{"type":"' + kind.encode() + b'","object":' + change.object_json() + b"}\n")
    if lines:
        await resp.write(b"".join(lines))


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
