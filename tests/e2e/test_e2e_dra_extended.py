"""Extended resources backed by DRA end to end (real broker, test API server, KEP-5004): a pod asking
`example.com/gpu: 2` the old way, on a cluster whose nodes publish no such resource and whose GPUs a
DeviceClass serves under that name, gets the claim kube-scheduler would make for it: created, owned by
the pod, allocated to devices no other claim holds, reserved, and named in the pod's status."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_cluster import NAMESPACE, pods_by_uid
from e2e_pipeline import Pipeline
from test_e2e_dra_allocator import NODE, allocated, seed
from test_e2e_dra_mixed import their_claim, their_pod

from schemas.annotations import SCHEDULER_NAME
from topoplace.dev.demo import dra
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

RESOURCE = "example.com/gpu"


def extended_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{dra.DRIVER}"'}}],
            "extendedResourceName": RESOURCE,
        },
    }


def asking_pod(name: str, gpus: int) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.invalid/e2e:latest", "resources": {"limits": {RESOURCE: str(gpus)}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "topoplace-e2e"}},
        "spec": {"schedulerName": SCHEDULER_NAME, "containers": [container]},
    }


async def test_a_pod_asking_an_extended_resource_gets_the_claim_kube_scheduler_would_make(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    names = seed(store)
    store.create(kube_resources.DEVICECLASSES, extended_class(f"{run_id}-gpus"))
    held = (names[0], names[1])
    their_claim(store, f"{run_id}-theirs", held, their_pod(store, f"{run_id}-web"))
    await pipeline.start_all()

    pod = store.create(kube_resources.PODS, asking_pod(f"{run_id}-trainer", 2), namespace=NAMESPACE)
    uid = str(pod["metadata"]["uid"])
    await pipeline.wait_bound([uid], timeout=45)

    bound = pods_by_uid(store)[uid]
    assert bound["spec"]["nodeName"] == NODE.name
    status = bound["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {"containerName": "main", "resourceName": RESOURCE, "requestName": "container-0-request-0"}
    ]
    name = status["resourceClaimName"]
    assert name.startswith(f"{run_id}-trainer-extended-resources-")
    claim = store.get(kube_resources.RESOURCECLAIMS, name, NAMESPACE)
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Pod", uid, True)
    devices = allocated(store, name)
    assert len(devices) == 2 and not set(devices) & set(held)  # never a device another claim holds
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [uid]
