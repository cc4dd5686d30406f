"""Discovery, as kubectl and client-go read it: `/version`, `/api`, `/apis`, `/apis/{group}`, one
APIResourceList per group-version, and the aggregated form (apidiscovery.k8s.io v2 and v2beta1) that
kubectl asks for first in its Accept header. The documents are built from the served resource types."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import msgspec
from aiohttp import web

from topoplace.dev.kubeapi import media
from topoplace.dev.kubeapi.errors import ApiError
from topoplace.dev.kubeapi.resources import ResourceType

# The release whose APIs these are: resource.k8s.io/v1 (DRA) is served from Kubernetes 1.34.
VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-topoplace",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-08-27T00:00:00Z",
    "goVersion": "go1.24.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_STATUS_VERBS = ["get", "patch", "update"]
_encoder = msgspec.json.Encoder()


class GroupVersion(msgspec.Struct, frozen=True):
    group: str  # "" = the core group, served under /api
    version: str

    @property
    def name(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def group_versions(served: Sequence[ResourceType]) -> dict[str, list[GroupVersion]]:
    """Each served group's versions, preferred (the storage version) first, groups in serving order."""
    groups: dict[str, list[GroupVersion]] = {}
    for rtype in served:
        versions = groups.setdefault(rtype.group, [])
        for version in rtype.versions:
            if GroupVersion(rtype.group, version) not in versions:
                versions.append(GroupVersion(rtype.group, version))
    return groups


def _resource_entries(rtype: ResourceType) -> list[dict[str, Any]]:
    """The APIResourceList entries of one type: the resource, then its subresources."""
    main: dict[str, Any] = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": _VERBS,
    }
    if rtype.short_names:
        main["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        main["categories"] = list(rtype.categories)
    entries = [main]
    if rtype.has_status:
        entries.append(_sub(rtype, "status", rtype.kind, _STATUS_VERBS))
    if rtype.group == "" and rtype.plural == "pods":
        entries.append(_sub(rtype, "binding", "Binding", ["create"]))
    return entries


def _sub(rtype: ResourceType, name: str, kind: str, verbs: list[str]) -> dict[str, Any]:
    return {
        "name": f"{rtype.plural}/{name}",
        "singularName": "",
        "namespaced": rtype.namespaced,
        "kind": kind,
        "verbs": verbs,
    }


def resource_list(served: Sequence[ResourceType], gv: GroupVersion) -> dict[str, Any]:
    entries = [e for r in served if r.group == gv.group and gv.version in r.versions for e in _resource_entries(r)]
    if gv.group == "" and any(r.plural == "pods" and r.group == "" for r in served):
        # POST /api/v1/namespaces/{ns}/bindings: the older way to bind, still served
        entries.append(
            {"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding", "verbs": ["create"]}
        )
    entries.sort(key=lambda e: e["name"])
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv.name, "resources": entries}


def api_group(group: str, versions: list[GroupVersion]) -> dict[str, Any]:
    listed = [{"groupVersion": gv.name, "version": gv.version} for gv in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": listed, "preferredVersion": listed[0]}


def group_list(served: Sequence[ResourceType]) -> dict[str, Any]:
    groups = [api_group(g, vs) for g, vs in group_versions(served).items() if g]
    for g in groups:
        del g["kind"], g["apiVersion"]  # inside a list the groups carry no kind, as the real server sends them
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_versions(host: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def aggregated(served: Sequence[ResourceType], legacy: bool, variant: tuple[str, str, str]) -> dict[str, Any]:
    """APIGroupDiscoveryList: every group (legacy: only the core group, at /api) with its resources inline."""
    items = []
    for group, versions in group_versions(served).items():
        if (group == "") != legacy:
            continue
        listed = [
            {
                "version": gv.version,
                "resources": [
                    _aggregated_resource(r, gv) for r in served if r.group == group and gv.version in r.versions
                ],
                "freshness": "Current",
            }
            for gv in versions
        ]
        items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": listed})
    group, version, _ = variant
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"{group}/{version}", "metadata": {}, "items": items}


def _aggregated_resource(rtype: ResourceType, gv: GroupVersion) -> dict[str, Any]:
    kind = {"group": gv.group, "version": gv.version, "kind": rtype.kind}
    entry: dict[str, Any] = {
        "resource": rtype.plural,
        "responseKind": kind,
        "scope": "Namespaced" if rtype.namespaced else "Cluster",
        "singularResource": rtype.singular,
        "verbs": _VERBS,
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    subresources = []
    if rtype.has_status:
        subresources.append({"subresource": "status", "responseKind": kind, "verbs": _STATUS_VERBS})
    if gv.group == "" and rtype.plural == "pods":
        binding = {"group": "", "version": "v1", "kind": "Binding"}
        subresources.append({"subresource": "binding", "responseKind": binding, "verbs": ["create"]})
    if subresources:
        entry["subresources"] = subresources
    return entry


# --- HTTP -------------------------------------------------------------------------------------


def _answer(body: Any, variant: tuple[str, str, str] = ("", "", "")) -> web.Response:
    resp = web.Response(body=_encoder.encode(body))
    resp.headers["Content-Type"] = media.content_type(variant)
    resp.headers["Vary"] = "Accept"
    return resp


def not_acceptable() -> ApiError:
    return ApiError(
        406, "NotAcceptable", "only the following media types are accepted: application/json, application/yaml"
    )


async def _root(served: tuple[ResourceType, ...], legacy: bool, request: web.Request) -> web.Response:
    variant = media.choose(request.headers.get("Accept", ""), (media.DISCOVERY_V2, media.DISCOVERY_V2BETA1))
    if variant is None:
        raise not_acceptable()
    if variant != ("", "", ""):
        return _answer(aggregated(served, legacy, variant), variant)
    return _answer(api_versions(request.host) if legacy else group_list(served))


async def _group(name: str, versions: list[GroupVersion], request: web.Request) -> web.Response:
    return _answer(api_group(name, versions))


async def _group_version(served: tuple[ResourceType, ...], gv: GroupVersion, request: web.Request) -> web.Response:
    return _answer(resource_list(served, gv))


async def _version(request: web.Request) -> web.Response:
    return _answer(VERSION_INFO)


def add_routes(router: web.UrlDispatcher, served: tuple[ResourceType, ...]) -> None:
    on = functools.partial
    for path in ("/version", "/version/"):
        router.add_get(path, _version)
    router.add_get("/api", on(_root, served, True))
    router.add_get("/apis", on(_root, served, False))
    for group, versions in group_versions(served).items():
        if group:
            router.add_get(f"/apis/{group}", on(_group, group, versions))
        for gv in versions:
            base = f"/apis/{gv.name}" if group else f"/api/{gv.version}"
            router.add_get(base, on(_group_version, served, gv))
