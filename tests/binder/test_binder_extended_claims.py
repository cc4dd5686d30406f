"""KEP-5004: the binder creates the claim for a pod's extended resources backed by DRA, allocates and
reserves it, names it in the pod's status, then binds; on a conflict it deletes the claim (test API server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from binder_support import FaultProxy, PodFactory, placement_for
from kubernetes_asyncio import client
from test_binder_claim_collisions import WatchedClaims, allocate_elsewhere
from test_binder_claims import DEVICES, DRIVER, NODE, POLICY, no_sleep

from schemas.dra import ClaimAllocation, DeviceResult, ExtendedClaimRequest
from schemas.dra_objects import AllocationResult, ContainerExtendedResourceRequest, ResourceClaimSpec
from schemas.events import BindingOutcome
from services.binder.apply import PodBinder
from services.binder.claims import ClaimWriter
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.dev.kubeapi import resources as kube_resources

REQUEST = "container-0-request-0"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


@pytest.fixture
def binder(core: client.CoreV1Api) -> PodBinder:
    return PodBinder(core, policy=POLICY, sleep=no_sleep)


def extended(pod: dict[str, Any], *devices: str) -> ClaimAllocation:
    spec = msgspec.convert(
        {"devices": {"requests": [{"name": REQUEST, "exactly": {"deviceClassName": "gpus", "count": len(devices)}}]}},
        ResourceClaimSpec,
    )
    results = tuple(DeviceResult(request=REQUEST, driver=DRIVER, pool=NODE, device=d) for d in devices)
    allocation = msgspec.convert({"devices": {"results": [msgspec.to_builtins(r) for r in results]}}, AllocationResult)
    made = ExtendedClaimRequest(
        generate_name=f"{pod['metadata']['name']}-extended-resources-",
        annotations={ANNOTATION: "true"},
        spec=spec,
        request_mappings=(
            ContainerExtendedResourceRequest(
                container_name="main", resource_name="nvidia.com/gpu", request_name=REQUEST
            ),
        ),
    )
    return ClaimAllocation(namespace="default", name="", uid="", results=results, allocation=allocation, extended=made)


def claims_of(kube_api: KubeApiServer) -> list[dict[str, Any]]:
    listed = kube_api.store.list(kube_resources.RESOURCECLAIMS, "default")
    items: list[dict[str, Any]] = listed[0] if isinstance(listed, tuple) else listed
    return [c for c in items if (c["metadata"].get("annotations") or {}).get(ANNOTATION) == "true"]


async def test_the_claim_is_created_owned_by_the_pod_allocated_and_named_in_its_status_before_the_binding(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, proxy: FaultProxy
) -> None:
    pod = make_pod("trainer")
    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(extended(pod, "gpu-2", "gpu-3"),)))
    assert result.outcome is BindingOutcome.BOUND, result.reason

    (claim,) = claims_of(kube_api)
    assert claim["metadata"]["name"].startswith("trainer-extended-resources-")
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "trainer",
        pod["metadata"]["uid"],
        True,
    )
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["gpu-2", "gpu-3"]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    status = kube_api.store.get(kube_resources.PODS, "trainer", "default")["status"]["extendedResourceClaimStatus"]
    assert status == {
        "resourceClaimName": claim["metadata"]["name"],
        "requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu", "requestName": REQUEST}],
    }
    order = [(c.method, c.path.rsplit("/", 1)[-1]) for c in proxy.log]
    assert order.index(("POST", "resourceclaims")) < order.index(("PATCH", "status")) < order.index(("POST", "binding"))


@pytest.fixture
async def watched(kube_client: client.ApiClient) -> AsyncIterator[WatchedClaims]:
    claims = WatchedClaims(kube_client)
    yield claims
    await claims.stop()


@pytest.fixture
def checking_binder(core: client.CoreV1Api, watched: WatchedClaims) -> PodBinder:
    """A binder that checks devices against its watch of every claim (as the service runs it)."""
    dra = client.ResourceV1Api(core.api_client)  # type: ignore[attr-defined]  # the stubs omit it
    writer = ClaimWriter(dra, request_timeout=POLICY.request_timeout_seconds, allocated=watched.allocated)
    return PodBinder(core, policy=POLICY, sleep=no_sleep, claims=writer)


async def test_a_conflict_deletes_the_created_claim_and_a_retry_makes_one_claim_only(
    kube_api: KubeApiServer, make_pod: PodFactory, checking_binder: PodBinder, watched: WatchedClaims
) -> None:
    allocate_elsewhere(kube_api, "web-gpu", "gpu-2")
    await watched.until(lambda: len(watched.allocated) == 1)
    pod = make_pod("trainer")

    refused = await checking_binder.bind(placement_for(pod, NODE, DEVICES, claims=(extended(pod, "gpu-2", "gpu-3"),)))
    assert refused.outcome is BindingOutcome.CONFLICT, refused.reason
    assert claims_of(kube_api) == []  # deleted, so that it holds nothing
    assert "extendedResourceClaimStatus" not in kube_api.store.get(kube_resources.PODS, "trainer", "default")["status"]

    again = await checking_binder.bind(placement_for(pod, NODE, DEVICES, claims=(extended(pod, "gpu-0", "gpu-1"),)))
    assert again.outcome is BindingOutcome.BOUND, again.reason
    (claim,) = claims_of(kube_api)
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["gpu-0", "gpu-1"]


async def test_a_claim_the_pod_owns_already_with_the_same_requests_is_used_again(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder
) -> None:
    pod = make_pod("trainer")
    made = extended(pod, "gpu-2", "gpu-3")
    assert made.extended is not None
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "trainer", "uid": pod["metadata"]["uid"], "controller": True}
    earlier = {  # created by an earlier try that stopped before allocating it
        "metadata": {
            "name": "trainer-extended-resources-abcde",
            "annotations": {ANNOTATION: "true"},
            "ownerReferences": [owner],
        },
        "spec": msgspec.to_builtins(made.extended.spec),
    }
    kube_api.store.create(kube_resources.RESOURCECLAIMS, earlier, namespace="default")

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(made,)))
    assert result.outcome is BindingOutcome.BOUND, result.reason
    (claim,) = claims_of(kube_api)
    assert claim["metadata"]["name"] == "trainer-extended-resources-abcde"
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["gpu-2", "gpu-3"]
