"""A device annotation is no authority: only the binder's seal gives a pod devices (issue 15, #3)."""

from __future__ import annotations

import pytest
from e2e_checks import pod_state
from e2e_cluster import CLUSTER, NAMESPACE, PodSpec, create_pod, gpus_per_node, pods_by_uid
from e2e_pipeline import Pipeline

from schemas import annotations as pod_annotations
from schemas.events import BindingOutcome, DeviceAssignment
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e


def squatter(name: str, node: str, gpus: int) -> dict[str, object]:
    """A pod that asks for no GPU, names its node itself and claims every GPU of it by annotation."""
    devices = tuple(DeviceAssignment(index=i) for i in range(gpus))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "annotations": {pod_annotations.DEVICES: pod_annotations.encode_devices(devices)},
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.invalid/squat:latest"}]},
        "status": {"phase": "Running"},
    }


async def test_pods_claiming_every_gpu_by_annotation_hold_none_and_a_full_node_pod_is_bound(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    per_node = gpus_per_node()
    for node in CLUSTER.nodes:
        store.create(kube_resources.PODS, squatter(f"{run_id}-squat-{node.name}", node.name, per_node[node.name]))
    await pipeline.start_all()

    uid = create_pod(store, PodSpec(name=f"{run_id}-whole-node", gpus=8))
    await pipeline.wait_until(lambda o: o.bound(uid) is not None, what="the 8-GPU pod bound beside the squatters")

    bound = pipeline.outcomes.bound(uid)
    assert bound is not None and bound.event.outcome is BindingOutcome.BOUND
    state = pod_state(pods_by_uid(store)[uid])
    assert state.node in per_node and len(state.devices) == 8
