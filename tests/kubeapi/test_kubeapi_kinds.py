"""Volcano PodGroups, Kueue Topologies and the DRA kinds: CRUD, status, selectors, watch, validation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubeapi_support import CustomApi, status_of
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException

VOLCANO, KUEUE = "scheduling.volcano.sh", "kueue.x-k8s.io"
STRATEGIC = "application/strategic-merge-patch+json"


def podgroup(name: str, min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": f"{VOLCANO}/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": "default"},
        "status": {"phase": "Running"},
    }


def topology(name: str, *labels: str) -> dict[str, Any]:
    return {"kind": "Topology", "metadata": {"name": name}, "spec": {"levels": [{"nodeLabel": x} for x in labels]}}


def resource_slice(name: str, node: str, driver: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": [{"name": "gpu-0", "attributes": {"index": {"int": 0}}}],
        },
    }


async def test_podgroup_crud_with_a_status_subresource(custom: CustomApi) -> None:
    created = await custom.create_namespaced_custom_object(VOLCANO, "v1beta1", "team-a", "podgroups", podgroup("pg"))
    assert created["metadata"]["namespace"] == "team-a"
    assert "status" not in created  # reset on create, as with every /status kind
    status = await custom.patch_namespaced_custom_object_status(
        VOLCANO,
        "v1beta1",
        "team-a",
        "podgroups",
        "pg",
        {"status": {"phase": "Inqueue"}},
        _content_type="application/merge-patch+json",
    )
    assert status["status"] == {"phase": "Inqueue"}
    patched = await custom.patch_namespaced_custom_object(
        VOLCANO,
        "v1beta1",
        "team-a",
        "podgroups",
        "pg",
        {"spec": {"minMember": 4}, "status": {"phase": "Running"}},
        _content_type="application/merge-patch+json",
    )
    assert patched["spec"]["minMember"] == 4 and patched["status"] == {"phase": "Inqueue"}
    listed = await custom.list_namespaced_custom_object(VOLCANO, "v1beta1", "team-a", "podgroups")
    assert listed["kind"] == "PodGroupList" and [p["metadata"]["name"] for p in listed["items"]] == ["pg"]
    with pytest.raises(ApiException) as err:  # a custom resource takes no strategic merge patch
        await custom.patch_namespaced_custom_object(
            VOLCANO, "v1beta1", "team-a", "podgroups", "pg", {"spec": {}}, _content_type=STRATEGIC
        )
    assert err.value.status == 415
    with pytest.raises(ApiException) as err:
        await custom.create_namespaced_custom_object(VOLCANO, "v1beta1", "team-a", "podgroups", podgroup("bad", -1))
    assert err.value.status == 422 and "spec.minMember" in status_of(err.value)["message"]


async def test_topology_is_served_as_v1beta2_and_v1beta1(custom: CustomApi) -> None:
    created = await custom.create_cluster_custom_object(
        KUEUE, "v1beta1", "topologies", topology("default", "cloud.example.com/block", "kubernetes.io/hostname")
    )
    assert created["apiVersion"] == f"{KUEUE}/v1beta1"
    got = await custom.get_cluster_custom_object(KUEUE, "v1beta2", "topologies", "default")
    assert got["apiVersion"] == f"{KUEUE}/v1beta2"
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    listed = await custom.list_cluster_custom_object(KUEUE, "v1beta1", "topologies")
    assert listed["apiVersion"] == f"{KUEUE}/v1beta1"
    assert [t["apiVersion"] for t in listed["items"]] == [f"{KUEUE}/v1beta1"]
    with pytest.raises(ApiException) as err:  # levels are immutable
        await custom.patch_cluster_custom_object(
            KUEUE,
            "v1beta2",
            "topologies",
            "default",
            {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
            _content_type="application/merge-patch+json",
        )
    assert err.value.status == 422 and "field is immutable" in status_of(err.value)["message"]


@pytest.mark.parametrize(
    "labels",
    [(), ("a", "a"), ("kubernetes.io/hostname", "rack")],
    ids=["no-levels", "repeated", "hostname-not-lowest"],
)
async def test_invalid_topology_is_422(custom: CustomApi, labels: tuple[str, ...]) -> None:
    with pytest.raises(ApiException) as err:
        await custom.create_cluster_custom_object(KUEUE, "v1beta2", "topologies", topology("t", *labels))
    assert err.value.status == 422 and "spec.levels" in status_of(err.value)["message"]


async def test_resource_slices_select_by_node_and_driver(dra: CustomApi) -> None:
    await dra.create_resource_slice(resource_slice("n1-gpu", "n1"))
    await dra.create_resource_slice(resource_slice("n2-gpu", "n2"))
    await dra.create_resource_slice(resource_slice("n1-nic", "n1", driver="nic.example.com"))
    on_n1 = await dra.list_resource_slice(field_selector="spec.nodeName=n1")
    assert [s.metadata.name for s in on_n1.items] == ["n1-gpu", "n1-nic"]
    gpus = await dra.list_resource_slice(field_selector="spec.driver=gpu.example.com,spec.nodeName=n1")
    assert [s.metadata.name for s in gpus.items] == ["n1-gpu"]
    assert gpus.items[0].spec.devices[0].name == "gpu-0"
    with pytest.raises(ApiException) as err:
        await dra.list_resource_slice(field_selector="spec.pool.name=n1")
    assert err.value.status == 400


async def test_resource_slice_validation_and_immutable_driver(dra: CustomApi) -> None:
    body = resource_slice("s", "n1")
    del body["spec"]["nodeName"]
    with pytest.raises(ApiException) as err:
        await dra.create_resource_slice(body)
    assert err.value.status == 422 and "exactly one of `nodeName`" in status_of(err.value)["message"]
    await dra.create_resource_slice(resource_slice("s", "n1"))
    with pytest.raises(ApiException) as err:
        await dra.patch_resource_slice("s", {"spec": {"driver": "other.example.com"}})
    assert err.value.status == 422
    assert status_of(err.value)["message"].startswith('ResourceSlice.resource.k8s.io "s" is invalid: spec.driver')


async def test_device_classes_and_claim_templates(dra: CustomApi) -> None:
    cls = await dra.create_device_class({"metadata": {"name": "gpu.example.com"}, "spec": {"selectors": []}})
    assert cls.metadata.uid
    template = {
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
    }
    created = await dra.create_namespaced_resource_claim_template("default", template)
    assert created.spec.spec.devices.requests[0].exactly.device_class_name == "gpu"
    with pytest.raises(ApiException) as err:  # the spec is immutable
        await dra.patch_namespaced_resource_claim_template(
            "one-gpu", "default", {"spec": {"spec": {"devices": {"requests": []}}}}
        )
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:  # a request needs `exactly` or `firstAvailable`
        await dra.create_namespaced_resource_claim(
            "default", {"metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "gpu"}]}}}
        )
    assert err.value.status == 422 and "spec.devices.requests[0]" in status_of(err.value)["message"]


async def test_watch_of_resource_claims(dra: CustomApi) -> None:
    await dra.create_namespaced_resource_claim("default", {"metadata": {"name": "c0"}, "spec": {}})
    listed = await dra.list_namespaced_resource_claim("default")
    # kubernetes-asyncio guesses the model `V1ResourceClaim` from the method's name; it is named otherwise
    async with watch.Watch(return_type="ResourceV1ResourceClaim") as w:
        stream = w.stream(
            dra.list_namespaced_resource_claim,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=5,
        )
        await dra.create_namespaced_resource_claim("default", {"metadata": {"name": "c1"}, "spec": {}})
        await dra.delete_namespaced_resource_claim("c1", "default")
        events = []

        async def read() -> None:
            async for event in stream:
                events.append((event["type"], event["object"].metadata.name))
                if len(events) == 2:
                    return

        await asyncio.wait_for(read(), 5)
    assert events == [("ADDED", "c1"), ("DELETED", "c1")]
