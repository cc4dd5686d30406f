"""DRA: the binder allocates and reserves a pod's ResourceClaims before it binds the pod (test API server)."""

from __future__ import annotations

from typing import Any

import pytest
from binder_support import FaultProxy, PodFactory, placement_for
from kubernetes_asyncio import client

from schemas.dra import DELETE_PROTECTION, ClaimAllocation, DeviceResult
from schemas.events import BindingOutcome, DeviceAssignment
from services.binder.apply import PodBinder
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.dev.kubeapi import resources as kube_resources

NODE = "gpu-node-1"
DRIVER = "gpu.nvidia.com"
POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=5, deadline_seconds=10.0)
DEVICES = (DeviceAssignment(index=2, uuid="GPU-2"), DeviceAssignment(index=3, uuid="GPU-3"))


async def no_sleep(seconds: float) -> None:
    return None


def make_claim(kube_api: KubeApiServer, name: str = "trainer-gpu-x1y2z") -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 2}}]}},
    }
    return kube_api.store.create(kube_resources.RESOURCECLAIMS, body, namespace="default")


def allocation_of(claim: dict[str, Any], *devices: str) -> ClaimAllocation:
    meta = claim["metadata"]
    return ClaimAllocation(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        results=tuple(DeviceResult(request="gpus", driver=DRIVER, pool=NODE, device=d) for d in devices),
    )


def stored(kube_api: KubeApiServer, kind: Any, name: str) -> dict[str, Any]:
    return kube_api.store.get(kind, name, "default")


@pytest.fixture
def binder(core: client.CoreV1Api) -> PodBinder:
    return PodBinder(core, policy=POLICY, sleep=no_sleep)


async def test_the_claim_is_protected_allocated_and_reserved_before_the_pod_is_bound(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, proxy: FaultProxy
) -> None:
    pod, claim = make_pod("trainer"), make_claim(kube_api)
    placement = placement_for(pod, NODE, DEVICES, claims=(allocation_of(claim, "gpu-2", "gpu-3"),))

    result = await binder.bind(placement)

    assert result.outcome is BindingOutcome.BOUND, result.reason
    after = stored(kube_api, kube_resources.RESOURCECLAIMS, claim["metadata"]["name"])
    assert DELETE_PROTECTION in after["metadata"]["finalizers"]
    assert after["status"]["allocation"] == {
        "devices": {
            "results": [
                {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": "gpu-2"},
                {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": "gpu-3"},
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
        },
    }
    assert after["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}]
    assert stored(kube_api, kube_resources.PODS, "trainer")["spec"]["nodeName"] == NODE
    # the status write comes before the binding: the kubelet never sees the pod with an unallocated claim
    order = [(c.method, c.path.rsplit("/", 1)[-1]) for c in proxy.log]
    assert order.index(("PUT", "status")) < order.index(("POST", "binding"))


async def test_a_claim_allocated_to_other_devices_for_another_pod_is_a_conflict_and_the_pod_stays_unbound(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder
) -> None:
    other, pod, claim = make_pod("other"), make_pod("trainer"), make_claim(kube_api)
    first = await binder.bind(placement_for(other, NODE, DEVICES, claims=(allocation_of(claim, "gpu-0"),)))
    assert first.outcome is BindingOutcome.BOUND

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(allocation_of(claim, "gpu-2"),)))

    assert result.outcome is BindingOutcome.CONFLICT
    assert "already allocated" in result.reason and "pods/other" in result.reason
    after = stored(kube_api, kube_resources.RESOURCECLAIMS, claim["metadata"]["name"])
    assert [r["device"] for r in after["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert not stored(kube_api, kube_resources.PODS, "trainer")["spec"].get("nodeName")


async def test_a_retry_of_the_same_decision_writes_nothing_more(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, proxy: FaultProxy
) -> None:
    pod, claim = make_pod("trainer"), make_claim(kube_api)
    placement = placement_for(pod, NODE, DEVICES, claims=(allocation_of(claim, "gpu-2"),))
    assert (await binder.bind(placement)).outcome is BindingOutcome.BOUND
    writes = len(proxy.calls("PUT", "status"))

    again = await binder.bind(placement)

    assert again.outcome is BindingOutcome.BOUND
    assert len(proxy.calls("PUT", "status")) == writes


async def test_an_earlier_decision_of_ours_for_the_same_pod_is_replaced(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, core: client.CoreV1Api
) -> None:
    pod, claim = make_pod("trainer"), make_claim(kube_api)
    # The claim is reserved for this pod on gpu-0, but the binding of that decision never happened.
    name = claim["metadata"]["name"]
    current = stored(kube_api, kube_resources.RESOURCECLAIMS, name)
    earlier = {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}
    current["status"] = {
        "allocation": {"devices": {"results": [earlier]}},
        "reservedFor": [{"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}],
    }
    dra = client.ResourceV1Api(core.api_client)  # type: ignore[attr-defined]  # the stubs omit it
    await dra.replace_namespaced_resource_claim_status(name, "default", current)  # type: ignore[arg-type]

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(allocation_of(claim, "gpu-3"),)))

    assert result.outcome is BindingOutcome.BOUND, result.reason
    after = stored(kube_api, kube_resources.RESOURCECLAIMS, name)
    assert [r["device"] for r in after["status"]["allocation"]["devices"]["results"]] == ["gpu-3"]


async def test_a_claim_that_is_gone_fails_the_placement(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder
) -> None:
    pod = make_pod("trainer")
    missing = ClaimAllocation(namespace="default", name="nope", uid="u", results=())

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(missing,)))

    assert result.outcome is BindingOutcome.FAILED and "does not exist" in result.reason
    assert not stored(kube_api, kube_resources.PODS, "trainer")["spec"].get("nodeName")
