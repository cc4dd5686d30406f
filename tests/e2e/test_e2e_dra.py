"""DRA end to end: a pod with a ResourceClaimTemplate ends with its claim allocated to exactly the
devices the placer chose, reserved for the pod, and the pod bound (real broker, test API server)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from e2e_cluster import CLUSTER, NAMESPACE, pods_by_uid
from e2e_pipeline import Pipeline

from schemas.annotations import SCHEDULER_NAME
from schemas.dra import DELETE_PROTECTION
from schemas.events import PlacementOutcome
from topoplace.dev.demo import dra
from topoplace.dev.demo.cluster import topology_of
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

DRIVER = dra.DRIVER
pcie_root = dra.pcie_root


def seed_slices(store: ObjectStore) -> dict[str, dict[str, str]]:
    """One slice per node as NVIDIA's DRA driver publishes it, and the DeviceClass it installs;
    returns node -> uuid -> device name."""
    store.create(kube_resources.DEVICECLASSES, dra.device_class())
    names: dict[str, dict[str, str]] = {}
    for node in CLUSTER.nodes:
        devices = topology_of(node).devices
        store.create(kube_resources.RESOURCESLICES, dra.resource_slice(node.name, devices))
        names[node.name] = {d.uuid: dra.device_name(d) for d in devices}
    return names


def h100_model() -> str:
    node = next(n for n in CLUSTER.nodes if n.fixture == "dgx-h100")
    return topology_of(node).devices[0].model


def template(name: str) -> dict[str, Any]:
    return dra.claim_template(name, NAMESPACE, count=2, model=h100_model())


def pod(name: str, template_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "topoplace-e2e"}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
            "containers": [
                {"name": "main", "image": "registry.invalid/e2e:latest", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def claim_named(store: ObjectStore, name: str) -> dict[str, Any]:
    return store.get(kube_resources.RESOURCECLAIMS, name, NAMESPACE)


async def test_a_pod_with_a_claim_template_ends_bound_with_its_claim_allocated_to_the_chosen_devices(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    names = seed_slices(store)
    store.create(kube_resources.RESOURCECLAIMTEMPLATES, template(f"{run_id}-two-h100"), namespace=NAMESPACE)
    await pipeline.start_all()
    created = store.create(kube_resources.PODS, pod(f"{run_id}-trainer", f"{run_id}-two-h100"), namespace=NAMESPACE)
    uid = str(created["metadata"]["uid"])
    (claim_status,) = pods_by_uid(store)[uid]["status"]["resourceClaimStatuses"]
    before = claim_named(store, claim_status["resourceClaimName"])

    await pipeline.wait_bound([uid], timeout=45)

    bound = pipeline.outcomes.bound(uid)
    assert bound is not None, pipeline.outcomes.describe([uid])
    placement = pipeline.outcomes.placement(uid, bound.event.decision_id)
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED
    after = claim_named(store, claim_status["resourceClaimName"])
    the_pod = pods_by_uid(store)[uid]
    assert the_pod["spec"]["nodeName"] == placement.node
    chosen = sorted(names[placement.node][d.uuid] for d in placement.devices)
    assert len(chosen) == 2
    results = after["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == chosen
    assert {(r["request"], r["driver"], r["pool"]) for r in results} == {("gpus", DRIVER, placement.node)}
    terms = after["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [placement.node]}]}]
    assert after["status"]["reservedFor"] == [{"resource": "pods", "name": the_pod["metadata"]["name"], "uid": uid}]
    assert DELETE_PROTECTION in after["metadata"]["finalizers"]
    # the constraint: both devices on one PCIe root, of the model the selector names
    topology = {d.uuid: d for d in topology_of(next(n for n in CLUSTER.nodes if n.name == placement.node)).devices}
    assert len({pcie_root(topology[d.uuid].numa_node) for d in placement.devices}) == 1
    assert {topology[d.uuid].model for d in placement.devices} == {h100_model()}
    assert "status" not in before or not before["status"].get("allocation")
    report = os.environ.get("TOPOPLACE_DRA_REPORT")
    if report:  # the claim before and after, for a reader who wants to see it
        with open(report, "w", encoding="utf-8") as f:
            json.dump({"before": before, "after": after}, f, indent=2)
