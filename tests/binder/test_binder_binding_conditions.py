"""Binding conditions: the binder binds a pod whose devices have bindingConditions only once the
claim's status.devices report them True, and gives up on a failure condition or at its timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from binder_support import PodFactory, placement_for
from kubernetes_asyncio import client

from schemas.dra import ClaimAllocation, DeviceResult
from schemas.dra_objects import AllocationResult
from schemas.events import BindingOutcome, DeviceAssignment
from services.binder.apply import PodBinder
from services.binder.binding_conditions import await_binding_conditions, judge
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.dev.kubeapi import resources as kube_resources

NODE = "gpu-node-1"
DRIVER = "gpu.example.com"
POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=5, deadline_seconds=10.0)
DEVICES = (DeviceAssignment(index=2, uuid="GPU-2"),)


def conditioned(namespace: str, name: str, uid: str = "") -> ClaimAllocation:
    result = {
        "request": "gpus",
        "driver": DRIVER,
        "pool": NODE,
        "device": "gpu-2",
        "bindingConditions": ["Attached"],
        "bindingFailureConditions": ["AttachFailed"],
    }
    allocation = msgspec.convert({"devices": {"results": [result]}}, AllocationResult)
    return ClaimAllocation(
        namespace=namespace,
        name=name,
        uid=uid,
        results=(DeviceResult(request="gpus", driver=DRIVER, pool=NODE, device="gpu-2"),),
        allocation=allocation,
    )


def device_status(**conditions: str) -> dict[str, Any]:
    entry = {"driver": DRIVER, "pool": NODE, "device": "gpu-2"}
    return {"status": {"devices": [{**entry, "conditions": [{"type": t, "status": s} for t, s in conditions.items()]}]}}


def test_a_device_is_ready_once_its_conditions_are_true_and_failed_once_a_failure_one_is() -> None:
    claim = conditioned("default", "c")
    assert not judge(claim, {}).ready
    assert not judge(claim, device_status(Attached="False")).ready
    assert judge(claim, device_status(Attached="True")).ready
    failed = judge(claim, device_status(Attached="False", AttachFailed="True"))
    assert not failed.ready and "binding failure condition AttachFailed is True" in failed.failure


async def test_waiting_ends_at_the_timeout_with_the_claims_named() -> None:
    now = [0.0]

    async def read(_: ClaimAllocation) -> dict[str, Any]:
        return device_status(Attached="False")

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    why = await await_binding_conditions((conditioned("ns", "c"),), read, timeout=5, sleep=sleep, clock=lambda: now[0])
    assert why == "binding conditions of ResourceClaim ns/c not met within 5 s"


@pytest.fixture
def binder(core: client.CoreV1Api) -> PodBinder:
    return PodBinder(core, policy=POLICY)


def make_claim(kube_api: KubeApiServer, name: str) -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER}}]}},
    }
    return kube_api.store.create(kube_resources.RESOURCECLAIMS, body, namespace="default")


async def driver_reports(kube_api: KubeApiServer, name: str, **conditions: str) -> None:
    """What the driver does: once the claim is allocated, it writes the device's conditions."""
    store = kube_api.store
    _, subscription = store.subscribe(kube_resources.RESOURCECLAIMS, "default", None)
    try:
        while not (store.get(kube_resources.RESOURCECLAIMS, name, "default").get("status") or {}).get("allocation"):
            subscription.wakeup.clear()
            subscription.pending.clear()
            await subscription.wakeup.wait()
        current = store.get(kube_resources.RESOURCECLAIMS, name, "default")
        status = {**current["status"], **device_status(**conditions)["status"]}
        store.replace(kube_resources.RESOURCECLAIMS, name, {**current, "status": status}, namespace="default",
                      status_only=True)  # fmt: skip
    finally:
        store.unsubscribe(subscription)


async def test_the_pod_is_bound_once_the_driver_reports_its_device_ready(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder
) -> None:
    pod, claim = make_pod("trainer"), make_claim(kube_api, "ready-claim")
    allocation = conditioned("default", "ready-claim", claim["metadata"]["uid"])
    driver = asyncio.create_task(driver_reports(kube_api, "ready-claim", Attached="True"))

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(allocation,)))
    await driver

    assert result.outcome is BindingOutcome.BOUND, result.reason
    after = kube_api.store.get(kube_resources.RESOURCECLAIMS, "ready-claim", "default")
    assert after["status"]["allocation"]["devices"]["results"][0]["bindingConditions"] == ["Attached"]
    assert kube_api.store.get(kube_resources.PODS, "trainer", "default")["spec"]["nodeName"] == NODE


async def test_a_failure_condition_fails_the_placement_and_the_pod_stays_unbound(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder
) -> None:
    pod, claim = make_pod("trainer"), make_claim(kube_api, "failing-claim")
    allocation = conditioned("default", "failing-claim", claim["metadata"]["uid"])
    driver = asyncio.create_task(driver_reports(kube_api, "failing-claim", AttachFailed="True"))

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(allocation,)))
    await driver

    assert result.outcome is BindingOutcome.FAILED
    assert "binding failure condition AttachFailed is True" in result.reason
    assert not kube_api.store.get(kube_resources.PODS, "trainer", "default")["spec"].get("nodeName")
