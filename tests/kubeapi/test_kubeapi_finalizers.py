"""Finalizers and deletion as the real server does them, for every kind; owner-reference garbage collection."""

from __future__ import annotations

import pytest
from kubeapi_support import CoreApi, CustomApi, pod_body, status_of
from kubernetes_asyncio.client.exceptions import ApiException

from topoplace.dev.kubeapi import KubeApiServer

FINALIZER = "example.com/cleanup"


async def test_delete_with_finalizers_marks_then_goes_when_they_are_emptied(
    kube_api: KubeApiServer, core: CoreApi
) -> None:
    await core.create_namespaced_pod(
        "default", {**pod_body("f1"), "metadata": {"name": "f1", "finalizers": [FINALIZER]}}
    )
    _, sub = kube_api.store.subscribe("pods", "default", kube_api.store.revision)
    deleted = await core.delete_namespaced_pod("f1", "default")
    assert deleted.metadata.deletion_timestamp is not None
    marked = await core.read_namespaced_pod("f1", "default")
    assert marked.metadata.deletion_timestamp is not None and marked.metadata.finalizers == [FINALIZER]
    again = await core.delete_namespaced_pod("f1", "default")  # a second delete changes nothing
    assert again.metadata.resource_version == marked.metadata.resource_version
    with pytest.raises(ApiException) as err:  # no finalizer may be added while deleting
        await core.patch_namespaced_pod("f1", "default", {"metadata": {"finalizers": [FINALIZER, "b.example.com/x"]}})
    assert err.value.status == 422
    assert "no new finalizers can be added if the object is being deleted" in status_of(err.value)["message"]
    await core.patch_namespaced_pod(
        "f1", "default", {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("f1", "default")
    assert err.value.status == 404
    assert [c.type for c in sub.pending] == ["MODIFIED", "DELETED"]
    kube_api.store.unsubscribe(sub)


async def test_finalizers_hold_custom_and_cluster_scoped_kinds_too(custom: CustomApi, dra: CustomApi) -> None:
    await custom.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "topologies",
        {"metadata": {"name": "t", "finalizers": [FINALIZER]}, "spec": {"levels": [{"nodeLabel": "rack"}]}},
    )
    marked = await custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "topologies", "t")
    assert marked["metadata"]["deletionTimestamp"]
    await dra.create_device_class({"metadata": {"name": "gpu", "finalizers": [FINALIZER]}, "spec": {}})
    await dra.delete_device_class("gpu")
    assert (await dra.read_device_class("gpu")).metadata.deletion_timestamp is not None
    got = await custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "topologies", "t")
    got["metadata"]["finalizers"] = []
    await custom.replace_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "topologies", "t", got)
    assert (await custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "topologies"))["items"] == []


async def test_deleting_an_owner_deletes_its_dependents(core: CoreApi) -> None:
    owner = await core.create_namespaced_pod("default", pod_body("owner"))
    other = await core.create_namespaced_pod("default", pod_body("other-owner"))

    def ref(pod: object, name: str) -> dict[str, str]:
        return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod.metadata.uid}  # type: ignore[attr-defined]

    await core.create_namespaced_event(
        "default", {"metadata": {"name": "only", "ownerReferences": [ref(owner, "owner")]}, "involvedObject": {}}
    )
    await core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "shared", "ownerReferences": [ref(owner, "owner"), ref(other, "other-owner")]},
            "involvedObject": {},
        },
    )
    await core.delete_namespaced_pod("owner", "default")
    names = [e.metadata.name for e in (await core.list_namespaced_event("default")).items]
    assert names == ["shared"]  # its other owner still exists
