"""What a real client reads before anything else, over plain HTTP: discovery (classic and aggregated,
chosen by the Accept header), /version, OpenAPI v3, server-side printing (Table), field validation."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from topoplace.dev.kubeapi import KubeApiServer, resources
from topoplace.dev.kubeapi.tables import human_duration

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_DISCOVERY = (
    f"{AGGREGATED},application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
KUBECTL_TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


async def _get(url: str, accept: str = "application/json") -> tuple[int, str, Any]:
    async with aiohttp.ClientSession() as http, http.get(url, headers={"Accept": accept}) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), json.loads(await resp.read())


async def test_classic_discovery_names_every_group_version_and_resource(kube_api: KubeApiServer) -> None:
    status, _, core = await _get(f"{kube_api.url}/api")
    assert status == 200 and core["kind"] == "APIVersions" and core["versions"] == ["v1"]
    _, _, groups = await _get(f"{kube_api.url}/apis")
    by_name = {g["name"]: g for g in groups["groups"]}
    assert set(by_name) == {r.group for r in resources.ALL if r.group}
    assert [v["version"] for v in by_name["kueue.x-k8s.io"]["versions"]] == ["v1beta2", "v1beta1"]
    assert by_name["kueue.x-k8s.io"]["preferredVersion"]["groupVersion"] == "kueue.x-k8s.io/v1beta2"
    _, _, v1 = await _get(f"{kube_api.url}/api/v1")
    listed = {r["name"]: r for r in v1["resources"]}
    assert listed["pods"]["shortNames"] == ["po"] and listed["pods"]["categories"] == ["all"]
    assert listed["pods"]["namespaced"] and not listed["nodes"]["namespaced"]
    assert listed["pods/binding"] == {
        "name": "pods/binding",
        "singularName": "",
        "namespaced": True,
        "kind": "Binding",
        "verbs": ["create"],
    }
    assert listed["pods/status"]["verbs"] == ["get", "patch", "update"] and "bindings" in listed
    assert "events/status" not in listed
    _, _, volcano = await _get(f"{kube_api.url}/apis/topology.volcano.sh/v1alpha1")
    (hypernodes, hn_status) = volcano["resources"]
    assert (hypernodes["kind"], hypernodes["namespaced"], hypernodes["shortNames"]) == ("HyperNode", False, ["hn"])
    assert hn_status["name"] == "hypernodes/status"
    _, _, group = await _get(f"{kube_api.url}/apis/resource.k8s.io")
    assert group["kind"] == "APIGroup" and group["preferredVersion"]["version"] == "v1"


async def test_aggregated_discovery_when_the_client_asks_for_it_first(kube_api: KubeApiServer) -> None:
    status, content_type, body = await _get(f"{kube_api.url}/apis", KUBECTL_DISCOVERY)
    assert status == 200 and content_type == AGGREGATED
    assert body["kind"] == "APIGroupDiscoveryList" and body["apiVersion"] == "apidiscovery.k8s.io/v2"
    podgroups = next(i for i in body["items"] if i["metadata"]["name"] == "scheduling.volcano.sh")
    (pg,) = podgroups["versions"][0]["resources"]
    assert (pg["resource"], pg["scope"], pg["shortNames"]) == ("podgroups", "Namespaced", ["pg", "podgroup-v1beta1"])
    assert pg["responseKind"] == {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "PodGroup"}
    _, _, legacy = await _get(f"{kube_api.url}/api", KUBECTL_DISCOVERY)
    (core,) = legacy["items"]
    pods = next(r for r in core["versions"][0]["resources"] if r["resource"] == "pods")
    assert {s["subresource"] for s in pods["subresources"]} == {"status", "binding"}
    _, beta_type, beta = await _get(f"{kube_api.url}/api", AGGREGATED.replace("v=v2", "v=v2beta1"))
    assert beta["apiVersion"] == "apidiscovery.k8s.io/v2beta1" and "v=v2beta1" in beta_type


async def test_discovery_refuses_what_it_cannot_answer_with_406(kube_api: KubeApiServer) -> None:
    status, _, body = await _get(f"{kube_api.url}/apis", "application/vnd.kubernetes.protobuf")
    assert status == 406 and body["reason"] == "NotAcceptable"
    status, _, _ = await _get(f"{kube_api.url}/api/v1/pods", "application/json;as=Table;v=v2;g=meta.k8s.io")
    assert status == 406


async def test_a_server_without_a_crd_does_not_advertise_it() -> None:
    served = [r for r in resources.ALL if r is not resources.HYPERNODES]
    async with KubeApiServer(served=served) as server:
        _, _, groups = await _get(f"{server.url}/apis")
        assert "topology.volcano.sh" not in {g["name"] for g in groups["groups"]}
        status, _, _ = await _get(f"{server.url}/apis/topology.volcano.sh/v1alpha1")
        assert status == 404


@pytest.mark.parametrize("path", ["/version", "/version/"])
async def test_version_names_the_release_with_a_git_version(kube_api: KubeApiServer, path: str) -> None:
    status, _, version = await _get(kube_api.url + path)
    assert status == 200 and version["gitVersion"].startswith("v1.34") and version["minor"] == "34"


async def test_openapi_v3_declares_field_validation_on_every_kinds_patch(kube_api: KubeApiServer) -> None:
    _, _, root = await _get(f"{kube_api.url}/openapi/v3")
    assert {"api/v1", "apis/topology.volcano.sh/v1alpha1", "apis/kueue.x-k8s.io/v1beta1"} <= set(root["paths"])
    _, _, doc = await _get(kube_api.url + root["paths"]["api/v1"]["serverRelativeURL"])
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}} in patch[
        "parameters"
    ]
    assert "dryRun" not in {p["name"] for p in patch["parameters"]}  # not supported, so not declared


async def _send(method: str, url: str, body: bytes) -> tuple[int, dict[str, Any], list[str]]:
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http, http.request(method, url, data=body, headers=headers) as resp:
        return resp.status, json.loads(await resp.read()), resp.headers.getall("Warning", [])


async def test_field_validation_strict_warn_and_ignore(kube_api: KubeApiServer) -> None:
    pods = f"{kube_api.url}/api/v1/namespaces/default/pods"
    body = (
        b'{"metadata":{"name":"a","name":"a","colour":"red"},"spec":{"containers":[{"name":"m","image":"i"}]},"sepc":1}'
    )
    status, refused, _ = await _send("POST", pods + "?fieldValidation=Strict", body)
    assert status == 400 and refused["reason"] == "BadRequest"
    assert refused["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: duplicate field "name", '
        'unknown field "sepc", unknown field "metadata.colour"'
    )
    assert kube_api.store.list("pods")[0] == []
    status, _, warnings = await _send("POST", pods + "?fieldValidation=Warn", body)
    assert status == 201 and '299 - "unknown field \\"sepc\\""' in warnings
    status, _, warnings = await _send(
        "POST", pods.replace("/pods", "/pods?fieldValidation=Ignore"), body.replace(b'"a"', b'"b"')
    )
    assert status == 201 and warnings == []
    status, bad, _ = await _send("POST", pods + "?fieldValidation=Loose", body)
    assert status == 400 and "fieldValidation" in bad["message"]


async def test_dry_run_is_refused_rather_than_carried_out(kube_api: KubeApiServer) -> None:
    body = b'{"metadata":{"name":"a"},"spec":{"containers":[{"name":"m","image":"i"}]}}'
    status, refused, _ = await _send("POST", f"{kube_api.url}/api/v1/namespaces/default/pods?dryRun=All", body)
    assert status == 400 and "dryRun" in refused["message"]
    assert kube_api.store.list("pods")[0] == []


async def test_table_for_a_list_an_object_and_a_watch(kube_api: KubeApiServer) -> None:
    kube_api.store.create(
        "pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "image": "i"}]}}, namespace="default"
    )
    status, content_type, table = await _get(f"{kube_api.url}/api/v1/namespaces/default/pods", KUBECTL_TABLE)
    assert status == 200 and content_type == "application/json;g=meta.k8s.io;v=v1;as=Table"
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns[:5] == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0)]
    assert ("Node", 1) in columns
    (row,) = table["rows"]
    assert row["cells"][:4] == ["p", "0/1", "Pending", "0"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "p"
    _, _, full = await _get(f"{kube_api.url}/api/v1/namespaces/default/pods/p?includeObject=Object", KUBECTL_TABLE)
    assert full["rows"][0]["object"]["kind"] == "Pod"
    _, _, plain = await _get(f"{kube_api.url}/api/v1/namespaces/default/pods/p")
    assert plain["kind"] == "Pod"
    url = f"{kube_api.url}/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1"
    async with aiohttp.ClientSession() as http, http.get(url, headers={"Accept": KUBECTL_TABLE}) as resp:
        first = json.loads(await resp.content.readline())
    assert first["type"] == "ADDED" and first["object"]["kind"] == "Table"
    assert first["object"]["rows"][0]["cells"][0] == "p" and first["object"]["columnDefinitions"]


@pytest.mark.parametrize(
    ("seconds", "printed"),
    [
        (-2, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (733 * 86400, "2y3d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_ages_are_printed_as_kube_prints_them(seconds: int, printed: str) -> None:
    assert human_duration(seconds) == printed
