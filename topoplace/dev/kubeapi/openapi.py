"""OpenAPI v3, as much of it as kubectl reads: the root index at `/openapi/v3` and one document per
group-version with its paths and operations. kubectl's create / replace / apply look for the
`fieldValidation` query parameter on a kind's PATCH operation; finding it, they leave validation to the
server (`?fieldValidation=Strict`, see `fieldcheck.py`) instead of downloading the protobuf OpenAPI v2.

The schemas are minimal (an object per kind, its group-version-kind named): enough to say what each
kind is, not to explain its fields (`kubectl explain` gets no field list here).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec
from aiohttp import web

from topoplace.dev.kubeapi.discovery import VERSION_INFO, GroupVersion, group_versions
from topoplace.dev.kubeapi.resources import ResourceType

_encoder = msgspec.json.Encoder()
_COMMON_QUERY = ("pretty", "fieldManager")  # no dryRun: not supported here
_LIST_QUERY = (
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
)


def _param(name: str, where: str = "query") -> dict[str, Any]:
    schema = {"type": "string"} if where == "path" else {"type": "string", "uniqueItems": True}
    param: dict[str, Any] = {"name": name, "in": where, "schema": schema}
    if where == "path":
        param["required"] = True
    return param


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _schema_name(rtype: ResourceType, gv: GroupVersion) -> str:
    return f"{rtype.group or 'io.k8s.api.core'}.{gv.version}.{rtype.kind}"


def _operation(
    action: str, rtype: ResourceType, gv: GroupVersion, verb_kind: str, query: tuple[str, ...]
) -> dict[str, Any]:
    schema = _ref(_schema_name(rtype, gv) + ("List" if verb_kind == "list" else ""))
    return {
        "operationId": f"{action}{rtype.kind}",
        "parameters": [_param(q) for q in query],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}},
        "x-kubernetes-action": verb_kind,
        "x-kubernetes-group-version-kind": {"group": rtype.group, "version": gv.version, "kind": rtype.kind},
    }


def _paths_of(rtype: ResourceType, gv: GroupVersion) -> dict[str, Any]:
    base = f"/apis/{gv.name}" if rtype.group else f"/api/{gv.version}"
    scope = f"{base}/namespaces/{{namespace}}/{rtype.plural}" if rtype.namespaced else f"{base}/{rtype.plural}"
    path_params = [_param("namespace", "path")] if rtype.namespaced else []
    writes = (*_COMMON_QUERY, "fieldValidation")
    collection = {
        "get": _operation("list", rtype, gv, "list", (*_LIST_QUERY, "pretty")),
        "post": _operation("create", rtype, gv, "post", writes),
        "delete": _operation("deletecollection", rtype, gv, "deletecollection", _LIST_QUERY),
        "parameters": path_params,
    }
    item = {
        "get": _operation("read", rtype, gv, "get", ("pretty",)),
        "put": _operation("replace", rtype, gv, "put", writes),
        "patch": _operation("patch", rtype, gv, "patch", (*writes, "force")),
        "delete": _operation("delete", rtype, gv, "delete", ("pretty", "gracePeriodSeconds")),
        "parameters": [*path_params, _param("name", "path")],
    }
    paths = {scope: collection, f"{scope}/{{name}}": item}
    if rtype.has_status:
        paths[f"{scope}/{{name}}/status"] = {k: v for k, v in item.items() if k != "delete"}
    return paths


def _schemas_of(rtype: ResourceType, gv: GroupVersion) -> dict[str, Any]:
    gvk = [{"group": rtype.group, "version": gv.version, "kind": rtype.kind}]
    name = _schema_name(rtype, gv)
    obj = {
        "type": "object",
        "description": f"{rtype.kind} ({gv.name}). This server publishes no field schema.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
        },
        "x-kubernetes-group-version-kind": gvk,
    }
    listed = {
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {"type": "array", "items": _ref(name)},
        },
        "x-kubernetes-group-version-kind": [{**gvk[0], "kind": f"{rtype.kind}List"}],
    }
    return {name: obj, f"{name}List": listed}


def document(served: Sequence[ResourceType], gv: GroupVersion) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rtype in served:
        if rtype.group == gv.group and gv.version in rtype.versions:
            paths.update(_paths_of(rtype, gv))
            schemas.update(_schemas_of(rtype, gv))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _url_path(gv: GroupVersion) -> str:
    return f"apis/{gv.name}" if gv.group else f"api/{gv.version}"


class OpenApiV3:
    """The encoded documents, built once per server (the served types do not change while it runs)."""

    def __init__(self, served: Sequence[ResourceType]) -> None:
        self.documents: dict[str, bytes] = {}
        for versions in group_versions(served).values():
            for gv in versions:
                self.documents[_url_path(gv)] = _encoder.encode(document(served, gv))
        index = {
            path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={hashlib.sha512(body).hexdigest().upper()}"}
            for path, body in self.documents.items()
        }
        self.root = _encoder.encode({"paths": index})

    async def _root(self, request: web.Request) -> web.Response:
        return web.Response(body=self.root, content_type="application/json")

    async def _document(self, path: str, request: web.Request) -> web.Response:
        resp = web.Response(body=self.documents[path], content_type="application/json")
        if request.query.get("hash"):
            resp.headers["Cache-Control"] = "public, immutable"  # the hash names this exact content
        return resp

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/openapi/v3", self._root)
        for path in self.documents:
            router.add_get(f"/openapi/v3/{path}", functools.partial(self._document, path))
