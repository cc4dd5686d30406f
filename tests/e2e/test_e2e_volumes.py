"""Volumes end to end (real broker, test API server acting as a provisioner and the PV controller):

- a pod with a WaitForFirstConsumer claim is bound, its claim bound to a new PersistentVolume with the
  topology (the zone) of the node the pod was bound to;
- a pod whose claim is bound to another zone's volume is unschedulable with kube-scheduler's reason,
  on the pod as its PodScheduled condition.

Before, the first pod was bound with its claim never provisioned, the second bound anywhere."""

from __future__ import annotations

import re
from typing import Any

import pytest
from e2e_cluster import CLUSTER, NAMESPACE, pods_by_uid
from e2e_pipeline import Outcomes, Pipeline

from schemas.annotations import SCHEDULER_NAME
from schemas.events import BindingOutcome
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def zone_of(node_name: str) -> str:
    tor = next(n.tor for n in CLUSTER.nodes if n.name == node_name)
    return f"zone-{tor.rsplit('-', 1)[-1]}"


def label_zones(store: ObjectStore) -> None:
    """Each ToR is a zone: its nodes get topology.kubernetes.io/zone."""
    for node in CLUSTER.nodes:
        current = store.get(kube_resources.NODES, node.name)
        labels = {**current["metadata"].get("labels", {}), ZONE: zone_of(node.name)}
        store.replace(
            kube_resources.NODES, node.name, {**current, "metadata": {**current["metadata"], "labels": labels}}
        )


def storage_class(store: ObjectStore, name: str) -> None:
    body = {"metadata": {"name": name}, "provisioner": "csi.e2e.example", "volumeBindingMode": "WaitForFirstConsumer"}
    store.create(kube_resources.STORAGECLASSES, body)


def claim(store: ObjectStore, name: str, class_name: str, volume: str = "") -> None:
    spec: dict[str, Any] = {
        "storageClassName": class_name,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
    }
    if volume:
        spec["volumeName"] = volume
    store.create(kube_resources.PERSISTENTVOLUMECLAIMS, {"metadata": {"name": name}, "spec": spec}, namespace=NAMESPACE)


def pod(store: ObjectStore, name: str, claim_name: str) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "topoplace-e2e"}},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/e2e:latest",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
        },
    }
    return str(store.create(kube_resources.PODS, body, namespace=NAMESPACE)["metadata"]["uid"])


async def test_a_pod_with_a_wait_for_first_consumer_claim_is_bound_and_its_volume_made_in_its_zone(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    label_zones(store)
    storage_class(store, f"{run_id}-wffc")
    claim(store, f"{run_id}-data", f"{run_id}-wffc")
    await pipeline.start_all()
    uid = pod(store, f"{run_id}-db", f"{run_id}-data")

    await pipeline.wait_until(lambda o: o.bound(uid) is not None, what="the pod bound", timeout=45)

    node = pods_by_uid(store)[uid]["spec"]["nodeName"]
    bound_claim = store.get(kube_resources.PERSISTENTVOLUMECLAIMS, f"{run_id}-data", NAMESPACE)
    assert bound_claim["metadata"]["annotations"][SELECTED_NODE] == node
    assert bound_claim["status"]["phase"] == "Bound"
    volume = store.get(kube_resources.PERSISTENTVOLUMES, bound_claim["spec"]["volumeName"])
    assert volume["spec"]["claimRef"]["uid"] == bound_claim["metadata"]["uid"]
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": ZONE, "operator": "In", "values": [zone_of(node)]}]


def conflict_reported(uid: str) -> Any:
    def seen(outcomes: Outcomes) -> bool:
        return any(
            "volume node affinity conflict" in b.event.reason for b in outcomes.of(uid, BindingOutcome.UNSCHEDULABLE)
        )

    return seen


async def test_a_pod_whose_claim_is_bound_to_another_zones_volume_is_unschedulable_with_kubes_reason(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    label_zones(store)
    storage_class(store, f"{run_id}-wffc")
    affinity = {
        "required": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-far"]}]}]
        }
    }
    ref = {"namespace": NAMESPACE, "name": f"{run_id}-far"}
    spec = {
        "storageClassName": f"{run_id}-wffc",
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "nodeAffinity": affinity,
        "claimRef": ref,
    }
    store.create(kube_resources.PERSISTENTVOLUMES, {"metadata": {"name": f"{run_id}-far-pv"}, "spec": spec})
    claim(store, f"{run_id}-far", f"{run_id}-wffc", volume=f"{run_id}-far-pv")
    assert store.get(kube_resources.PERSISTENTVOLUMECLAIMS, f"{run_id}-far", NAMESPACE)["status"]["phase"] == "Bound"
    await pipeline.start_all()
    uid = pod(store, f"{run_id}-stuck", f"{run_id}-far")

    await pipeline.wait_until(conflict_reported(uid), what="the volume conflict reported", timeout=45)

    nodes = len(CLUSTER.nodes)
    (reported, *_) = [b for b in pipeline.outcomes.of(uid, BindingOutcome.UNSCHEDULABLE) if "volume" in b.event.reason]
    # The shared broker's compacted topology topic may still name nodes of earlier runs (not ready
    # here): every node of this cluster must fail on the volume, and none may fit.
    counted = re.match(
        r"0/\d+ nodes are available: (\d+) node\(s\) had volume node affinity conflict[,.]", reported.event.reason
    )
    assert counted is not None, reported.event.reason
    assert int(counted.group(1)) == nodes, reported.event.reason
    assert "nodeName" not in pods_by_uid(store)[uid]["spec"]
