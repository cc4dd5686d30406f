"""pods/binding: the checks and answers of the real server, and the KWOK-style start of the pod."""

from __future__ import annotations

import pytest
from kubeapi_support import CoreApi, pod_body, status_of
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException


def binding(pod: str, node: str, uid: str | None = None, annotations: dict[str, str] | None = None) -> client.V1Binding:
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod, uid=uid, annotations=annotations),
        target=client.V1ObjectReference(kind="Node", api_version="v1", name=node),
    )


async def test_binding_is_201_and_starts_the_pod(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("b1"))
    _, status, _ = await core.create_namespaced_pod_binding_with_http_info(
        "b1", "default", binding("b1", "node-1", uid=pod.metadata.uid, annotations={"topoplace.io/node": "node-1"})
    )
    assert status == 201
    bound = await core.read_namespaced_pod("b1", "default")
    assert bound.spec.node_name == "node-1"
    assert bound.status.phase == "Running"
    assert {c.type: c.status for c in bound.status.conditions}["PodScheduled"] == "True"
    assert bound.metadata.annotations == {"topoplace.io/node": "node-1"}
    assert int(bound.metadata.resource_version) > int(pod.metadata.resource_version)


@pytest.mark.parametrize("second_node", ["node-2", "node-1"])
async def test_binding_a_bound_pod_is_409_with_the_real_message(core: CoreApi, second_node: str) -> None:
    await core.create_namespaced_pod("default", pod_body("b2"))
    await core.create_namespaced_pod_binding("b2", "default", binding("b2", "node-1"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding("b2", "default", binding("b2", second_node))
    assert err.value.status == 409
    status = status_of(err.value)
    assert status["reason"] == "Conflict"
    assert (
        status["message"]
        == 'Operation cannot be fulfilled on pods/binding "b2": pod b2 is already assigned to node "node-1"'
    )
    assert (await core.read_namespaced_pod("b2", "default")).spec.node_name == "node-1"


async def test_binding_a_missing_pod_is_404(core: CoreApi) -> None:
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding("nope", "default", binding("nope", "node-1"))
    assert err.value.status == 404


async def test_binding_with_another_pods_uid_is_409_precondition(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("b3"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding("b3", "default", binding("b3", "node-1", uid="not-this-pod"))
    assert err.value.status == 409
    assert "Precondition failed: UID in precondition: not-this-pod" in status_of(err.value)["message"]
    assert (await core.read_namespaced_pod("b3", "default")).spec.node_name is None


async def test_binding_without_target_name_is_422(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("b4"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding(
            "b4", "default", {"metadata": {"name": "b4"}, "target": {"kind": "Node"}}
        )
    assert err.value.status == 422


async def test_namespaced_bindings_endpoint(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("b5"))
    await core.create_namespaced_binding("default", binding("b5", "node-3"))
    assert (await core.read_namespaced_pod("b5", "default")).spec.node_name == "node-3"


async def test_binding_replaces_an_unschedulable_condition_by_type(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("b6"))
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no GPUs"}
    other = {"type": "example.com/Checked", "status": "True"}
    await core.patch_namespaced_pod_status("b6", "default", {"status": {"conditions": [unschedulable, other]}})
    await core.create_namespaced_pod_binding("b6", "default", binding("b6", "node-1"))
    conditions = (await core.read_namespaced_pod("b6", "default")).status.conditions
    by_type = {c.type: c for c in conditions}
    assert [c.type for c in conditions].count("PodScheduled") == 1
    assert by_type["PodScheduled"].status == "True"
    assert by_type["PodScheduled"].reason is None
    assert by_type["PodScheduled"].last_transition_time is not None
    assert by_type["example.com/Checked"].status == "True"  # other conditions stay


async def test_binding_a_gated_pod_is_409(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("b7", schedulingGates=[{"name": "kueue.x-k8s.io/topology"}]))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding("b7", "default", binding("b7", "node-1"))
    assert err.value.status == 409
    assert status_of(err.value)["message"].endswith("pod b7 has non-empty .spec.schedulingGates")
    await core.patch_namespaced_pod(
        "b7", "default", {"spec": {"schedulingGates": None}}, _content_type="application/merge-patch+json"
    )
    await core.create_namespaced_pod_binding("b7", "default", binding("b7", "node-1"))
    assert (await core.read_namespaced_pod("b7", "default")).spec.node_name == "node-1"


async def test_binding_a_pod_being_deleted_is_409(core: CoreApi) -> None:
    await core.create_namespaced_pod(
        "default", {**pod_body("b8"), "metadata": {"name": "b8", "finalizers": ["x.io/y"]}}
    )
    await core.delete_namespaced_pod("b8", "default")
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod_binding("b8", "default", binding("b8", "node-1"))
    assert err.value.status == 409 and "is being deleted" in status_of(err.value)["message"]


async def test_binding_clears_the_nominated_node(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("b9"))
    await core.patch_namespaced_pod_status("b9", "default", {"status": {"nominatedNodeName": "node-2"}})
    await core.create_namespaced_pod_binding("b9", "default", binding("b9", "node-1"))
    assert (await core.read_namespaced_pod("b9", "default")).status.nominated_node_name is None
