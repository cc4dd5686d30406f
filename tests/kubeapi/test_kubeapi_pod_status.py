"""Writes through pods/status: what a scheduler does to report an unschedulable pod."""

from __future__ import annotations

import pytest
from kubeapi_support import CoreApi, pod_body
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException


def _conditions(pod: client.V1Pod) -> dict[str, client.V1PodCondition]:
    return {c.type: c for c in pod.status.conditions or []}


async def test_strategic_merge_patch_of_conditions_merges_by_type(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("s1"))
    await core.patch_namespaced_pod_status(
        "s1", "default", {"status": {"conditions": [{"type": "example.com/A", "status": "True"}]}}
    )
    patched = await core.patch_namespaced_pod_status(
        "s1",
        "default",
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
                ]
            }
        },
    )
    conditions = _conditions(patched)
    assert conditions["PodScheduled"].reason == "Unschedulable"
    assert conditions["PodScheduled"].message == "0/3 nodes"
    assert conditions["example.com/A"].status == "True"
    again = await core.patch_namespaced_pod_status(
        "s1", "default", {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "message": "1/3"}]}}
    )
    assert [c.type for c in again.status.conditions].count("PodScheduled") == 1
    assert _conditions(again)["PodScheduled"].message == "1/3"
    assert _conditions(again)["PodScheduled"].reason == "Unschedulable"  # a strategic merge keeps other fields
    assert again.status.phase == "Pending"


async def test_merge_patch_of_status_replaces_the_conditions_list(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("s2"))
    await core.patch_namespaced_pod_status(
        "s2", "default", {"status": {"conditions": [{"type": "example.com/A", "status": "True"}]}}
    )
    patched = await core.patch_namespaced_pod_status(
        "s2",
        "default",
        {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
        _content_type="application/merge-patch+json",
    )
    assert list(_conditions(patched)) == ["PodScheduled"]


async def test_replace_status_changes_only_the_status(kube_client: client.ApiClient, core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("s3", labels={"a": "1"}))
    body = kube_client.sanitize_for_serialization(pod)
    body["metadata"]["labels"] = {"a": "2"}
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    replaced = await core.replace_namespaced_pod_status("s3", "default", body)
    assert _conditions(replaced)["PodScheduled"].reason == "Unschedulable"
    assert replaced.metadata.labels == {"a": "1"}
    body["metadata"]["resourceVersion"] = pod.metadata.resource_version  # stale now
    with pytest.raises(ApiException) as err:
        await core.replace_namespaced_pod_status("s3", "default", body)
    assert err.value.status == 409


async def test_writes_to_the_pod_keep_the_status_written_through_status(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("s4"))
    await core.patch_namespaced_pod_status(
        "s4", "default", {"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    )
    patched = await core.patch_namespaced_pod(
        "s4", "default", {"metadata": {"labels": {"x": "1"}}, "status": {"conditions": []}}
    )
    assert patched.metadata.labels == {"x": "1"}
    assert _conditions(patched)["PodScheduled"].status == "False"
