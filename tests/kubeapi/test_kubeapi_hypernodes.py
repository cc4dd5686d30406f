"""Volcano HyperNodes as custom objects: CRUD, validation, watch."""

from __future__ import annotations

from typing import Any

import pytest
from kubeapi_support import CustomApi, status_of
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "topology.volcano.sh", "v1alpha1", "hypernodes"


def hypernode(name: str, tier: int, nodes: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]},
    }


@pytest.fixture
def custom(kube_client: client.ApiClient) -> CustomApi:
    return client.CustomObjectsApi(kube_client)


async def test_hypernode_crud(custom: CustomApi) -> None:
    created = await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, hypernode("tor-1", 1, ["n1", "n2"]))
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    got = await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "tor-1")
    assert got["spec"]["members"][1]["selector"]["exactMatch"]["name"] == "n2"
    patched = await custom.patch_cluster_custom_object(
        GROUP, VERSION, PLURAL, "tor-1", {"spec": {"tier": 2}}, _content_type="application/merge-patch+json"
    )
    assert patched["spec"]["tier"] == 2 and len(patched["spec"]["members"]) == 2
    listed = await custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert listed["kind"] == "HyperNodeList" and [h["metadata"]["name"] for h in listed["items"]] == ["tor-1"]
    await custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "tor-1")
    with pytest.raises(ApiException) as err:
        await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "tor-1")
    assert err.value.status == 404


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"members": []}, "spec.tier"), ({"tier": 1, "members": [{"type": "Rack"}]}, "spec.members[0].type")],
)
async def test_hypernode_validation_is_422(custom: CustomApi, spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiException) as err:
        await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {"metadata": {"name": "bad"}, "spec": spec})
    assert err.value.status == 422
    assert field in status_of(err.value)["message"]


async def test_strategic_merge_patch_on_a_custom_object_is_415(custom: CustomApi) -> None:
    await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, hypernode("s", 1, []))
    with pytest.raises(ApiException) as err:
        await custom.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, "s", {"spec": {"tier": 2}}, _content_type="application/strategic-merge-patch+json"
        )
    assert err.value.status == 415


async def test_hypernode_watch(custom: CustomApi) -> None:
    listed = await custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    async with watch.Watch() as w:
        stream = w.stream(
            custom.list_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=5,
        )
        await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, hypernode("spine", 2, []))
        event = await stream.__anext__()
    assert event["type"] == "ADDED" and event["object"]["spec"]["tier"] == 2
