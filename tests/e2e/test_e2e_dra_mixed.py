"""DRA in a mixed cluster, end to end (real broker, test API server): claims that kube-scheduler
allocated for its own pods on a node are never given again. Our pods get only the free devices,
no device is named by two claims, and once every device is taken a pod is unschedulable with a
reason that names the devices and the claims holding them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from e2e_cluster import CLUSTER, NAMESPACE
from e2e_pipeline import Outcomes, Pipeline

from schemas.annotations import SCHEDULER_NAME
from schemas.events import BindingOutcome
from topoplace.dev.demo import dra
from topoplace.dev.demo.cluster import topology_of
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

NODE = next(n for n in CLUSTER.nodes if n.fixture == "dgx-h100")
# kube-scheduler's claims for its own pods: 5 of the node's 8 GPUs
THEIRS = {"web-gpus": ("gpu-0", "gpu-1", "gpu-2"), "infer-gpus": ("gpu-5", "gpu-6")}


def their_pod(store: ObjectStore, name: str) -> dict[str, Any]:
    """A pod kube-scheduler placed: bound to the node, not ours."""
    body = {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": NODE.name,
            "containers": [{"name": "main", "image": "registry.invalid/web:latest"}],
        },
    }
    return store.create(kube_resources.PODS, body, namespace=NAMESPACE)


def their_claim(store: ObjectStore, name: str, devices: tuple[str, ...], pod: dict[str, Any]) -> None:
    """A claim allocated and reserved as kube-scheduler writes it: created, then its status."""
    spec = {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": dra.DRIVER, "count": 2}}]}}
    claim = store.create(
        kube_resources.RESOURCECLAIMS,
        {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec},
        namespace=NAMESPACE,
    )
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpus", "driver": dra.DRIVER, "pool": NODE.name, "device": d} for d in devices]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE.name]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
    }
    store.replace(kube_resources.RESOURCECLAIMS, name, claim, namespace=NAMESPACE, status_only=True)


def our_pod(store: ObjectStore, name: str, template: str) -> str:
    body = {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [
                {"name": "main", "image": "registry.invalid/e2e:latest", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }
    return str(store.create(kube_resources.PODS, body, namespace=NAMESPACE)["metadata"]["uid"])


def allocated_devices(store: ObjectStore) -> dict[str, list[str]]:
    """Every allocated claim in the namespace -> the devices its allocation names."""
    items, _ = store.list(kube_resources.RESOURCECLAIMS, NAMESPACE)
    return {
        c["metadata"]["name"]: [r["device"] for r in c["status"]["allocation"]["devices"]["results"]]
        for c in items
        if (c.get("status") or {}).get("allocation")
    }


async def test_claims_another_scheduler_allocated_are_never_given_again(pipeline: Pipeline, run_id: str) -> None:
    store = pipeline.kube_api.store
    store.create(kube_resources.DEVICECLASSES, dra.device_class())
    store.create(kube_resources.RESOURCESLICES, dra.resource_slice(NODE.name, topology_of(NODE).devices))
    for claim_name, devices in THEIRS.items():
        their_claim(store, claim_name, devices, their_pod(store, f"{claim_name}-pod"))
    template = f"{run_id}-one-gpu"
    store.create(
        kube_resources.RESOURCECLAIMTEMPLATES, dra.claim_template(template, NAMESPACE, count=1), namespace=NAMESPACE
    )
    await pipeline.start_all()

    ours = [our_pod(store, f"{run_id}-worker-{i}", template) for i in range(3)]
    await pipeline.wait_bound(ours, timeout=45)

    for uid in ours:
        assert pipeline.outcomes.bound(uid) is not None, pipeline.outcomes.describe(ours)
    held = allocated_devices(store)
    theirs = {d for devices in THEIRS.values() for d in devices}
    mine = [d for name, devices in held.items() if name not in THEIRS for d in devices]
    assert sorted(mine) == ["gpu-3", "gpu-4", "gpu-7"]  # only the devices nobody else holds
    assert {name: tuple(held[name]) for name in THEIRS} == THEIRS  # theirs untouched
    assert not set(mine) & theirs
    assert [d for d, n in Counter(d for devices in held.values() for d in devices).items() if n > 1] == []

    late = our_pod(store, f"{run_id}-late", template)

    def told_why(outcomes: Outcomes) -> bool:  # (it may first be told its claim is not created yet)
        return any("allocated to other" in o.event.reason for o in outcomes.of(late, BindingOutcome.UNSCHEDULABLE))

    await pipeline.wait_until(told_why, what="the late pod told the devices are held", timeout=30)

    assert pipeline.outcomes.bound(late) is None
    (refused, *_) = [
        o for o in pipeline.outcomes.of(late, BindingOutcome.UNSCHEDULABLE) if "allocated to other" in o.event.reason
    ]
    assert "allocated to other" in refused.event.reason or "allocated to another" in refused.event.reason
    assert f"ResourceClaim {NAMESPACE}/web-gpus" in refused.event.reason, refused.event.reason
    assert len(allocated_devices(store)) == len(THEIRS) + len(ours)  # the late pod's claim got nothing
