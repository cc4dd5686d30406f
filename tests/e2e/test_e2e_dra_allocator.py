"""DRA through the structured allocator end to end (real broker, test API server): a DeviceClass's CEL
selector decides the devices, a tainted device is never given, and a pod whose claim does not exist
yet is told why, then bound once the claim appears."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from e2e_cluster import CLUSTER, NAMESPACE, pods_by_uid
from e2e_pipeline import Outcomes, Pipeline

from schemas.annotations import SCHEDULER_NAME
from schemas.events import BindingOutcome
from topoplace.dev.demo import dra
from topoplace.dev.demo.cluster import topology_of
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

DRIVER = dra.DRIVER
NODE = next(n for n in CLUSTER.nodes if n.fixture == "dgx-h100")
LOW_GPUS = "low-gpus.example.com"


def seed(store: ObjectStore, *, tainted: int | None = None) -> dict[int, str]:
    """NVIDIA's class, one class of the GPUs with index < 4 (a CEL selector), and one node's slice
    (device `tainted` with a NoSchedule taint); returns index -> device name."""
    store.create(kube_resources.DEVICECLASSES, dra.device_class())
    low = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": LOW_GPUS},
        "spec": {"selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].index < 4'}}]},
    }
    store.create(kube_resources.DEVICECLASSES, low)
    devices = topology_of(NODE).devices
    body = dra.resource_slice(NODE.name, devices)
    for device in body["spec"]["devices"]:
        if tainted is not None and device["attributes"]["index"]["int"] == tainted:
            device["taints"] = [{"key": "example.com/xid-error", "value": "79", "effect": "NoSchedule"}]
    store.create(kube_resources.RESOURCESLICES, body)
    return {d.index: dra.device_name(d) for d in devices}


def claim_body(name: str, count: int, device_class: str = LOW_GPUS) -> dict[str, Any]:
    exactly = {"deviceClassName": device_class, "count": count}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
    }


def pod_body(name: str, pod_claim: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "topoplace-e2e"}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "resourceClaims": [{"name": "gpu", **pod_claim}],
            "containers": [
                {"name": "main", "image": "registry.invalid/e2e:latest", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def create_pod(store: ObjectStore, name: str, pod_claim: dict[str, str]) -> str:
    return str(store.create(kube_resources.PODS, pod_body(name, pod_claim), namespace=NAMESPACE)["metadata"]["uid"])


def allocated(store: ObjectStore, name: str) -> list[str]:
    claim = store.get(kube_resources.RESOURCECLAIMS, name, NAMESPACE)
    return sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"])


async def told(pipeline: Pipeline, uid: str, reason: str) -> None:
    """Until the pod is reported unschedulable with `reason` (or with it and a note after "; ")."""

    def said(outcomes: Outcomes) -> bool:
        return any(o.event.reason.split("; ")[0] == reason for o in outcomes.of(uid, BindingOutcome.UNSCHEDULABLE))

    await pipeline.wait_until(said, what=f"pod told {reason!r}", timeout=30)


def scheduled_condition(store: ObjectStore, uid: str) -> dict[str, Any] | None:
    conditions = pods_by_uid(store)[uid].get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


async def condition_written(store: ObjectStore, uid: str, timeout: float = 30.0) -> dict[str, Any]:
    """The pod's PodScheduled condition (the binder writes it after it reports), waited for on the
    API server's own change feed."""
    _, subscription = store.subscribe(kube_resources.PODS, NAMESPACE, None)
    try:
        async with asyncio.timeout(timeout):
            while (found := scheduled_condition(store, uid)) is None:
                subscription.wakeup.clear()
                subscription.pending.clear()
                await subscription.wakeup.wait()
            return found
    finally:
        store.unsubscribe(subscription)


async def test_the_classes_cel_selector_picks_the_devices_and_the_tainted_one_is_never_given(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    names = seed(store, tainted=0)
    store.create(kube_resources.RESOURCECLAIMS, claim_body(f"{run_id}-three", 3), namespace=NAMESPACE)
    store.create(kube_resources.RESOURCECLAIMS, claim_body(f"{run_id}-one-more", 1), namespace=NAMESPACE)
    await pipeline.start_all()

    first = create_pod(store, f"{run_id}-first", {"resourceClaimName": f"{run_id}-three"})
    await pipeline.wait_bound([first], timeout=45)
    # index < 4 by the class's selector; index 0 is tainted: 1, 2 and 3, whatever else is free
    assert allocated(store, f"{run_id}-three") == sorted(names[i] for i in (1, 2, 3))
    assert pods_by_uid(store)[first]["spec"]["nodeName"] == NODE.name

    second = create_pod(store, f"{run_id}-second", {"resourceClaimName": f"{run_id}-one-more"})
    await told(pipeline, second, "cannot allocate all claims")  # only the tainted one is left in the class
    assert pipeline.outcomes.bound(second) is None
    claim = store.get(kube_resources.RESOURCECLAIMS, f"{run_id}-one-more", NAMESPACE)
    assert not (claim.get("status") or {}).get("allocation")


async def test_a_pod_whose_claim_template_is_missing_is_told_why_and_bound_once_the_claim_appears(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    seed(store)
    await pipeline.start_all()

    name = f"{run_id}-waiting"
    uid = create_pod(store, name, {"resourceClaimTemplateName": f"{run_id}-later"})
    why = f'pod "{NAMESPACE}/{name}": ResourceClaim not created yet'
    await told(pipeline, uid, why)
    condition = await condition_written(store, uid)
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", why)

    template = dra.claim_template(f"{run_id}-later", NAMESPACE, count=1)
    store.create(kube_resources.RESOURCECLAIMTEMPLATES, template, namespace=NAMESPACE)  # the controller makes the claim
    await pipeline.wait_bound([uid], timeout=45)
    (status,) = pods_by_uid(store)[uid]["status"]["resourceClaimStatuses"]
    assert len(allocated(store, status["resourceClaimName"])) == 1


async def test_a_pod_whose_named_claim_does_not_exist_is_told_why_and_bound_once_it_is_created(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    seed(store)
    await pipeline.start_all()

    uid = create_pod(store, f"{run_id}-named", {"resourceClaimName": f"{run_id}-mine"})
    await told(pipeline, uid, f'resourceclaim.resource.k8s.io "{run_id}-mine" not found')

    store.create(kube_resources.RESOURCECLAIMS, claim_body(f"{run_id}-mine", 2, DRIVER), namespace=NAMESPACE)
    await pipeline.wait_bound([uid], timeout=45)
    assert len(allocated(store, f"{run_id}-mine")) == 2


async def test_a_device_a_taint_rule_selects_is_never_given(pipeline: Pipeline, run_id: str) -> None:
    store = pipeline.kube_api.store
    names = seed(store)
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"{run_id}-xid"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": NODE.name, "device": names[1]},
            "taint": {"key": "example.com/xid-error", "value": "79", "effect": "NoSchedule"},
        },
    }
    store.create(kube_resources.DEVICETAINTRULES, rule)
    store.create(kube_resources.RESOURCECLAIMS, claim_body(f"{run_id}-three", 3), namespace=NAMESPACE)
    await pipeline.start_all()

    uid = create_pod(store, f"{run_id}-pod", {"resourceClaimName": f"{run_id}-three"})
    await pipeline.wait_bound([uid], timeout=45)
    assert allocated(store, f"{run_id}-three") == sorted(names[i] for i in (0, 2, 3))
