"""Create / get / list / replace / patch / delete through the real kubernetes-asyncio client."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubeapi_support import CoreApi, CustomApi, pod_body, status_of
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException


async def test_create_fills_server_fields(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("team-a", pod_body())
    assert pod.metadata.name.startswith("pod-") and len(pod.metadata.name) == len("pod-") + 5
    uuid.UUID(pod.metadata.uid)
    assert pod.metadata.creation_timestamp is not None
    assert int(pod.metadata.resource_version) > 0
    assert pod.metadata.namespace == "team-a"
    assert pod.status.phase == "Pending"
    got = await core.read_namespaced_pod(pod.metadata.name, "team-a")
    assert got.metadata.uid == pod.metadata.uid


async def test_create_answers_201(kube_client: client.ApiClient) -> None:
    core: CoreApi = client.CoreV1Api(kube_client)
    _, status, _ = await core.create_namespaced_pod_with_http_info("default", pod_body("p"))
    assert status == 201


async def test_resource_version_increases_across_kinds(core: CoreApi) -> None:
    a = await core.create_namespaced_pod("default", pod_body("a"))
    n = await core.create_node({"metadata": {"name": "n1"}})
    b = await core.create_namespaced_pod("default", pod_body("b"))
    assert int(a.metadata.resource_version) < int(n.metadata.resource_version) < int(b.metadata.resource_version)


async def test_duplicate_create_is_409_already_exists(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("dup"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", pod_body("dup"))
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "AlreadyExists"


async def test_same_name_in_other_namespace_is_fine(core: CoreApi) -> None:
    await core.create_namespaced_pod("a", pod_body("same"))
    pod = await core.create_namespaced_pod("b", pod_body("same"))
    assert pod.metadata.namespace == "b"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"metadata": {"name": "x"}, "spec": {"containers": []}}, "spec.containers"),
        ({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}}, "spec.containers[0].image"),
        ({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "metadata.name"),
    ],
)
async def test_missing_required_field_is_422_naming_it(core: CoreApi, body: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert err.value.status == 422
    status = status_of(err.value)
    assert status["reason"] == "Invalid" and field in status["message"]


async def test_get_missing_is_404_status(core: CoreApi) -> None:
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("ghost", "default")
    assert err.value.status == 404
    status = status_of(err.value)
    assert status["kind"] == "Status" and status["reason"] == "NotFound"
    assert status["message"] == 'pods "ghost" not found'


async def test_list_carries_a_resource_version_at_least_every_items(core: CoreApi) -> None:
    for i in range(3):
        await core.create_namespaced_pod("default", pod_body(f"p{i}"))
    await core.create_namespaced_pod("other", pod_body("q"))
    listed = await core.list_namespaced_pod("default")
    assert sorted(p.metadata.name for p in listed.items) == ["p0", "p1", "p2"]
    assert all(int(p.metadata.resource_version) <= int(listed.metadata.resource_version) for p in listed.items)
    everywhere = await core.list_pod_for_all_namespaces()
    assert len(everywhere.items) == 4


async def test_replace_with_stale_resource_version_is_409(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("r"))
    pod.metadata.labels = {"v": "1"}
    updated = await core.replace_namespaced_pod("r", "default", pod)
    assert updated.metadata.labels == {"v": "1"}
    assert int(updated.metadata.resource_version) > int(pod.metadata.resource_version)
    pod.metadata.labels = {"v": "2"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_pod("r", "default", pod)
    assert err.value.status == 409
    assert status_of(err.value)["reason"] == "Conflict"
    assert (await core.read_namespaced_pod("r", "default")).metadata.labels == {"v": "1"}


async def test_replace_ignores_status(kube_client: client.ApiClient, core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("s"))
    body = kube_client.sanitize_for_serialization(pod)
    body["status"] = {"phase": "Succeeded"}
    updated = await core.replace_namespaced_pod("s", "default", body)
    assert updated.metadata.uid == pod.metadata.uid
    assert updated.status.phase == "Pending"


async def test_replace_with_another_uid_is_409_precondition_failed(
    kube_client: client.ApiClient, core: CoreApi
) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("u", labels={"v": "1"}))
    body = kube_client.sanitize_for_serialization(pod)
    body["metadata"]["uid"] = "uid-of-a-deleted-pod"
    body["metadata"]["labels"] = {"v": "2"}
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_pod("u", "default", body)
    assert err.value.status == 409
    assert status_of(err.value)["message"] == (
        'Operation cannot be fulfilled on pods "u": Precondition failed: '
        f"UID in precondition: uid-of-a-deleted-pod, UID in object meta: {pod.metadata.uid}"
    )
    assert (await core.read_namespaced_pod("u", "default")).metadata.labels == {"v": "1"}


@pytest.mark.parametrize("subresource", ["", "status"])
async def test_patch_with_another_uid_is_422_and_changes_nothing(core: CoreApi, subresource: str) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("pu"))
    patch = {"metadata": {"uid": "uid-of-a-deleted-pod"}, "status": {"conditions": [{"type": "X", "status": "True"}]}}
    patch_call = core.patch_namespaced_pod_status if subresource else core.patch_namespaced_pod
    with pytest.raises(ApiException) as err:
        await patch_call("pu", "default", patch)
    assert err.value.status == 422
    assert status_of(err.value)["message"] == (
        'Pod "pu" is invalid: metadata.uid: Invalid value: "uid-of-a-deleted-pod": field is immutable'
    )
    after = await core.read_namespaced_pod("pu", "default")
    assert after.metadata.resource_version == pod.metadata.resource_version
    # The pod's own uid is no obstacle: that is how a write is aimed at one incarnation of a name.
    patch["metadata"]["uid"] = pod.metadata.uid
    await core.patch_namespaced_pod_status("pu", "default", patch)


async def test_strategic_merge_patch_of_annotations(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("m", labels={"keep": "yes", "drop": "x"}))
    patched = await core.patch_namespaced_pod(
        "m", "default", {"metadata": {"annotations": {"a": "1"}, "labels": {"drop": None}}}
    )
    assert patched.metadata.annotations == {"a": "1"}
    assert patched.metadata.labels == {"keep": "yes"}


async def test_merge_patch_content_type(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("mp"))
    patched = await core.patch_namespaced_pod(
        "mp", "default", {"metadata": {"annotations": {"b": "2"}}}, _content_type="application/merge-patch+json"
    )
    assert patched.metadata.annotations == {"b": "2"}


async def test_json_patch(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("jp", labels={"x": "1"}))
    patched = await core.patch_namespaced_pod(
        "jp", "default", [{"op": "replace", "path": "/metadata/labels/x", "value": "2"}]
    )
    assert patched.metadata.labels == {"x": "2"}


async def test_patch_with_stale_resource_version_is_409(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("ps"))
    await core.patch_namespaced_pod("ps", "default", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "ps", "default", {"metadata": {"resourceVersion": pod.metadata.resource_version, "labels": {"a": "2"}}}
        )
    assert err.value.status == 409


async def test_pod_node_name_cannot_be_patched(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("imm"))
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod("imm", "default", {"spec": {"nodeName": "n1"}})
    assert err.value.status == 422


async def test_delete_then_404(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("d"))
    deleted = await core.delete_namespaced_pod("d", "default")
    assert deleted.metadata.uid == pod.metadata.uid
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("d", "default")
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        await core.delete_namespaced_pod("d", "default")
    assert err.value.status == 404


async def test_nodes_keep_status_on_create_and_cordon_by_patch(core: CoreApi) -> None:
    node = await core.create_node(
        {
            "metadata": {"name": "gpu-1", "labels": {"zone": "a"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert node.status.allocatable == {"nvidia.com/gpu": "8"}
    cordoned = await core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    assert cordoned.spec.unschedulable is True
    assert cordoned.status.allocatable == {"nvidia.com/gpu": "8"}
    status = await core.patch_node_status("gpu-1", {"status": {"allocatable": {"nvidia.com/gpu": "4"}}})
    assert status.status.allocatable == {"nvidia.com/gpu": "4"}
    await core.delete_node("gpu-1")
    assert (await core.list_node()).items == []


async def test_core_and_events_v1_events(kube_client: client.ApiClient) -> None:
    core: CoreApi = client.CoreV1Api(kube_client)
    events: CustomApi = client.EventsV1Api(kube_client)
    ev = await core.create_namespaced_event(
        "default",
        {
            "metadata": {"generateName": "p."},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Scheduled",
            "message": "ok",
            "type": "Normal",
        },
    )
    assert ev.reason == "Scheduled"
    found = await core.list_namespaced_event("default", field_selector="involvedObject.name=p,reason=Scheduled")
    assert [e.metadata.name for e in found.items] == [ev.metadata.name]
    with pytest.raises(ApiException) as err:  # events.k8s.io/v1 requires eventTime and the reporter
        await events.create_namespaced_event("default", {"metadata": {"name": "e1"}, "reason": "X"})
    assert err.value.status == 422
    v1 = await events.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e2"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "topoplace.io/binder",
            "reportingInstance": "binder-0",
            "action": "Binding",
            "reason": "Scheduled",
            "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        },
    )
    assert v1.reporting_controller == "topoplace.io/binder"
    assert [e.metadata.name for e in (await events.list_namespaced_event("default")).items] == ["e2"]


async def test_status_subresource_changes_only_the_status(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("st", labels={"a": "1"}))
    updated = await core.patch_namespaced_pod_status(
        "st", "default", {"metadata": {"labels": {"a": "2"}}, "status": {"phase": "Succeeded"}}
    )
    assert updated.status.phase == "Succeeded"
    assert updated.metadata.labels == {"a": "1"}


async def test_a_pod_created_with_a_node_starts_running(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("pre", nodeName="n1"))
    assert pod.spec.node_name == "n1" and pod.status.phase == "Running"


async def test_kind_mismatch_is_400(core: CoreApi) -> None:
    body = pod_body("k")
    body["kind"] = "Node"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert err.value.status == 400


async def test_delete_collection_by_label(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("x1", labels={"batch": "1"}))
    await core.create_namespaced_pod("default", pod_body("x2", labels={"batch": "1"}))
    await core.create_namespaced_pod("default", pod_body("y", labels={"batch": "2"}))
    await core.delete_collection_namespaced_pod("default", label_selector="batch=1")
    assert [p.metadata.name for p in (await core.list_namespaced_pod("default")).items] == ["y"]


async def test_lists_are_ordered_by_namespace_then_name(core: CoreApi) -> None:
    for ns, name in [("b", "z"), ("a", "y"), ("b", "a"), ("a", "x")]:
        await core.create_namespaced_pod(ns, pod_body(name))
    listed = await core.list_pod_for_all_namespaces()
    assert [(p.metadata.namespace, p.metadata.name) for p in listed.items] == [
        ("a", "x"),
        ("a", "y"),
        ("b", "a"),
        ("b", "z"),
    ]
