"""The test server behaves as a CSI provisioner and the PersistentVolume controller would: a claim whose
node the scheduler selected gets a volume with that node's topology and is bound to it; a volume
pre-bound to a claim binds it; a class without a provisioner provisions nothing."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from topoplace.dev.kubeapi import KubeApiServer, resources
from topoplace.dev.kubeapi.store import ObjectStore
from topoplace.dev.kubeapi.volumes import VolumeProvisioner

ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def cluster(*, provisioner: str = "csi.example.com", mode: str = "WaitForFirstConsumer") -> ObjectStore:
    store = ObjectStore()
    VolumeProvisioner().install(store)
    store.create(resources.NODES, {"metadata": {"name": "n-z2", "labels": {ZONE: "z2"}}})
    store.create(resources.NODES, {"metadata": {"name": "n-plain", "labels": {"kubernetes.io/hostname": "n-plain"}}})
    store.create(
        resources.STORAGECLASSES,
        {"metadata": {"name": "fast"}, "provisioner": provisioner, "volumeBindingMode": mode},
    )
    return store


def new_claim(store: ObjectStore, name: str = "data") -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "storageClassName": "fast",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "5Gi"}},
        },
    }
    store.create(resources.PERSISTENTVOLUMECLAIMS, body, namespace="team-a")
    return store.get(resources.PERSISTENTVOLUMECLAIMS, name, "team-a")


def select_node(store: ObjectStore, claim: dict[str, Any], node: str) -> dict[str, Any]:
    patch = {
        "metadata": {"annotations": {SELECTED_NODE: node}, "resourceVersion": claim["metadata"]["resourceVersion"]}
    }
    name = claim["metadata"]["name"]
    store.patch(resources.PERSISTENTVOLUMECLAIMS, name, "application/merge-patch+json", patch, namespace="team-a")
    return store.get(resources.PERSISTENTVOLUMECLAIMS, name, "team-a")


def test_a_wait_for_first_consumer_claim_waits_for_its_node_then_gets_a_volume_in_that_zone() -> None:
    store = cluster()
    claim = new_claim(store)
    assert claim["status"] == {"phase": "Pending"} and store.list(resources.PERSISTENTVOLUMES)[0] == []

    bound = select_node(store, claim, "n-z2")

    (volume,) = store.list(resources.PERSISTENTVOLUMES)[0]
    assert volume["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
    assert volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z2"]}]}
    ]
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert volume["spec"]["capacity"] == {"storage": "5Gi"} and volume["spec"]["storageClassName"] == "fast"
    assert volume["status"]["phase"] == "Bound"
    assert bound["spec"]["volumeName"] == volume["metadata"]["name"]
    assert bound["status"]["phase"] == "Bound" and bound["status"]["capacity"] == {"storage": "5Gi"}
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"


def test_a_node_without_a_zone_pins_the_volume_to_itself() -> None:
    store = cluster()
    select_node(store, new_claim(store), "n-plain")
    (volume,) = store.list(resources.PERSISTENTVOLUMES)[0]
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n-plain"]}]


def test_a_static_volume_pre_bound_to_a_claim_binds_it() -> None:
    store = cluster(provisioner="kubernetes.io/no-provisioner")
    store.create(
        resources.PERSISTENTVOLUMES,
        {"metadata": {"name": "local-1"}, "spec": {"storageClassName": "fast", "capacity": {"storage": "10Gi"}}},
    )
    assert store.get(resources.PERSISTENTVOLUMES, "local-1")["status"]["phase"] == "Available"
    claim = new_claim(store)
    select_node(store, claim, "n-z2")
    assert store.list(resources.PERSISTENTVOLUMES)[0][0]["metadata"]["name"] == "local-1"  # nothing provisioned

    volume = store.get(resources.PERSISTENTVOLUMES, "local-1")
    ref = {"kind": "PersistentVolumeClaim", "namespace": "team-a", "name": "data", "uid": claim["metadata"]["uid"]}
    store.replace(resources.PERSISTENTVOLUMES, "local-1", {**volume, "spec": {**volume["spec"], "claimRef": ref}})

    bound = store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "team-a")
    assert bound["spec"]["volumeName"] == "local-1" and bound["status"]["phase"] == "Bound"
    assert store.get(resources.PERSISTENTVOLUMES, "local-1")["status"]["phase"] == "Bound"


def test_an_immediate_class_provisions_at_once_anywhere() -> None:
    store = cluster(mode="Immediate")
    claim = new_claim(store)
    (volume,) = store.list(resources.PERSISTENTVOLUMES)[0]
    assert "nodeAffinity" not in volume["spec"]
    assert store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "team-a")["spec"]["volumeName"] == (
        f"pvc-{claim['metadata']['uid']}"
    )


async def test_over_http_a_selected_node_written_by_a_client_is_provisioned(kube_client: client.ApiClient) -> None:
    core, storage = client.CoreV1Api(kube_client), client.StorageV1Api(kube_client)
    await core.create_node({"metadata": {"name": "n1", "labels": {ZONE: "z1"}}})
    await storage.create_storage_class(
        {"metadata": {"name": "fast"}, "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}
    )
    body = {"metadata": {"name": "data"}, "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"]}}
    await core.create_namespaced_persistent_volume_claim("team-a", body)
    await core.patch_namespaced_persistent_volume_claim(
        "data", "team-a", {"metadata": {"annotations": {SELECTED_NODE: "n1"}}}
    )
    claim = await core.read_namespaced_persistent_volume_claim("data", "team-a")
    assert claim.status.phase == "Bound" and claim.spec.volume_name.startswith("pvc-")


async def test_the_provisioner_is_an_option_of_the_server() -> None:
    async with KubeApiServer(volume_provisioner=False) as server:
        server.store.create(resources.STORAGECLASSES, {"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})
        body = {"metadata": {"name": "data", "namespace": "a"}, "spec": {"storageClassName": "fast"}}
        server.store.create(resources.PERSISTENTVOLUMECLAIMS, body, namespace="a")
        assert server.store.list(resources.PERSISTENTVOLUMES)[0] == []
        assert "status" not in server.store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "a")


def test_a_claim_made_with_its_volume_name_is_bound_to_that_volume() -> None:
    store = cluster(provisioner="kubernetes.io/no-provisioner")
    store.create(
        resources.PERSISTENTVOLUMES,
        {"metadata": {"name": "pv-far"}, "spec": {"storageClassName": "fast", "capacity": {"storage": "10Gi"}}},
    )
    body = {
        "metadata": {"name": "data", "namespace": "team-a"},
        "spec": {"storageClassName": "fast", "volumeName": "pv-far"},
    }
    created = store.create(resources.PERSISTENTVOLUMECLAIMS, body, namespace="team-a")

    bound = store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "team-a")
    volume = store.get(resources.PERSISTENTVOLUMES, "pv-far")
    assert bound["status"]["phase"] == "Bound" and volume["status"]["phase"] == "Bound"
    assert volume["spec"]["claimRef"]["uid"] == created["metadata"]["uid"]
