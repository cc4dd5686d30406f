"""PersistentVolumeClaims, PersistentVolumes and StorageClasses -> storage.claims / storage.volumes /
storage.classes, keyed by object, only what kube-scheduler's volume filters read; pods carry the names
of their claims. The watcher reads an object exactly as `engine place --cluster` does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from cluster_fakes import RecordingPublisher, Sent
from cluster_objects import pod, pod_json
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import PendingPodEvent, PersistentVolumeEvent, StorageClassEvent, VolumeClaimEvent
from schemas.kube import NodeSelectorRequirement, NodeSelectorTerm
from schemas.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from services.collector.cluster import storage
from services.collector.cluster import translate as tr
from services.collector.cluster.watcher import ClusterWatcher
from topoplace.cluster_objects.files import ClusterObject
from topoplace.cluster_objects.storage import catalog_of
from topoplace.dev.kubeapi import KubeApiServer, resources
from topoplace.kube_storage import ClaimObject, StorageClassObject, VolumeObject

ZONE = "topology.kubernetes.io/zone"


def claim_body(name: str, *, storage_class: str | None = "fast", size: str = "10Gi", **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": name, "namespace": "team-a", **meta}, "spec": spec}


def volume_body(name: str, zone: str, **spec: Any) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    affinity = {"required": {"nodeSelectorTerms": [term]}}
    return {
        "metadata": {"name": name, "labels": {ZONE: zone}},
        "spec": {
            "storageClassName": "fast",
            "capacity": {"storage": "20Gi"},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": affinity,
            **spec,
        },
    }


def class_body(name: str, *, default: bool = False) -> dict[str, Any]:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {
        "metadata": {"name": name, "annotations": annotations, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "provisioner": "csi.example.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["z1", "z2"]}]}],
    }


def zone_term(*zones: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=ZONE, operator="In", values=zones),))


# --- the translation ------------------------------------------------------------------------------


def test_each_object_carries_what_the_volume_filters_read() -> None:
    claim_event, problems = storage.claim_event(
        msgspec.convert(claim_body("data", annotations={"volume.kubernetes.io/selected-node": "n1"}), ClaimObject), 1.0
    )
    assert problems == []
    assert claim_event.claim == PersistentVolumeClaim(
        namespace="team-a",
        name="data",
        storage_class="fast",
        access_modes=("ReadWriteOnce",),
        request_bytes=10 * 2**30,
        selected_node="n1",
    )
    bound = volume_body("pv-1", "z1", claimRef={"namespace": "team-a", "name": "data"})
    volume_event, _ = storage.volume_event(msgspec.convert(bound, VolumeObject), 1.0)
    assert volume_event.volume == PersistentVolume(
        name="pv-1",
        storage_class="fast",
        capacity_bytes=20 * 2**30,
        access_modes=("ReadWriteOnce",),
        node_terms=(zone_term("z1"),),
        claim="team-a/data",
        labels={ZONE: "z1"},
    )
    class_event, _ = storage.class_event(msgspec.convert(class_body("fast", default=True), StorageClassObject), 1.0)
    assert class_event.storage_class == StorageClass(
        name="fast",
        provisioner="csi.example.com",
        binding_mode="WaitForFirstConsumer",
        allowed_topologies=(zone_term("z1", "z2"),),
    )
    assert class_event.default and class_event.created_at == "2026-01-01T00:00:00Z"


def test_the_watcher_reads_an_object_as_engine_place_does() -> None:
    bodies = {
        "PersistentVolumeClaim": claim_body("data", storage_class=None),
        "PersistentVolume": volume_body("pv-1", "z2"),
        "StorageClass": class_body("fast", default=True),
    }
    catalog = catalog_of(ClusterObject(kind=kind, where="f.json", body=body) for kind, body in bodies.items())
    claim, _ = storage.claim_event(msgspec.convert(bodies["PersistentVolumeClaim"], ClaimObject), 0.0)
    volume, _ = storage.volume_event(msgspec.convert(bodies["PersistentVolume"], VolumeObject), 0.0)
    storage_class, _ = storage.class_event(msgspec.convert(bodies["StorageClass"], StorageClassObject), 0.0)
    assert catalog.claims == {"team-a/data": claim.claim}
    assert catalog.volumes == {"pv-1": volume.volume}
    assert catalog.classes == {"fast": storage_class.storage_class} and catalog.default_class == "fast"


def test_an_unreadable_size_is_named_and_the_claim_still_goes_out() -> None:
    event, problems = storage.claim_event(msgspec.convert(claim_body("data", size="ten gigs"), ClaimObject), 1.0)
    assert [(p.object, p.field) for p in problems] == [("team-a/data", "spec.resources.requests.storage")]
    assert event.claim.key == "team-a/data" and event.claim.request_bytes == 0


def test_pods_carry_their_claims_by_name_pending_and_bound() -> None:
    volumes = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "cache", "emptyDir": {}},
    ]
    pending, _ = tr.pending_event(pod("web", spec_extra={"volumes": volumes}), 1.0)
    assert pending.volume_claims == ("data", "web-scratch")
    bound, _ = tr.bound_event(pod("web", node="n1", spec_extra={"volumes": volumes}), 1.0, ours=True)
    assert bound.volume_claims == ("data", "web-scratch")


def test_a_gone_object_is_a_deleted_event_then_a_tombstone() -> None:
    tracker = storage.claim_tracker()
    tracker.observe(msgspec.convert(claim_body("data"), ClaimObject), 1.0)
    deleted, tombstone = tracker.gone("team-a/data", 2.0).publications
    assert (deleted.topic, deleted.key, tombstone.key) == (topics.STORAGE_CLAIMS.name, "team-a/data", "team-a/data")
    assert isinstance(deleted.event, VolumeClaimEvent) and deleted.event.deleted and tombstone.event is None


# --- against the test API server ------------------------------------------------------------------


@pytest.fixture
async def running(kube_client: client.ApiClient, publisher: RecordingPublisher) -> AsyncIterator[ClusterWatcher]:
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.wait_ready(), 5)
    yield watcher
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def on(topic: topics.Topic, key: str, *, deleted: bool = False) -> Callable[[Sent], bool]:
    return lambda s: (
        s.topic == topic.name
        and s.key == key
        and isinstance(s.event, VolumeClaimEvent | PersistentVolumeEvent | StorageClassEvent)
        and s.event.deleted is deleted
    )


async def test_claims_volumes_and_classes_reach_their_topics_keyed_by_object(
    kube_api: KubeApiServer, running: ClusterWatcher, publisher: RecordingPublisher
) -> None:
    kube_api.store.create(resources.STORAGECLASSES, class_body("fast"))
    kube_api.store.create(resources.PERSISTENTVOLUMES, volume_body("pv-1", "z1"))
    kube_api.store.create(resources.PERSISTENTVOLUMECLAIMS, claim_body("data"), namespace="team-a")
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    kube_api.store.create(resources.PODS, pod_json("web", namespace="team-a", spec_extra={"volumes": volumes}))

    (claim,) = await publisher.wait_for(on(topics.STORAGE_CLAIMS, "team-a/data"))
    (volume,) = await publisher.wait_for(on(topics.STORAGE_VOLUMES, "pv-1"))
    (storage_class,) = await publisher.wait_for(on(topics.STORAGE_CLASSES, "fast"))
    (pending,) = await publisher.wait_for(lambda s: s.topic == topics.PODS_PENDING.name)

    assert isinstance(claim.event, VolumeClaimEvent) and claim.event.claim.request_bytes == 10 * 2**30
    assert isinstance(volume.event, PersistentVolumeEvent) and volume.event.volume.node_terms == (zone_term("z1"),)
    assert isinstance(storage_class.event, StorageClassEvent)
    assert storage_class.event.storage_class.binding_mode == "WaitForFirstConsumer"
    assert isinstance(pending.event, PendingPodEvent) and pending.event.volume_claims == ("data",)

    kube_api.store.delete(resources.PERSISTENTVOLUMECLAIMS, "data", namespace="team-a")
    await publisher.wait_for(on(topics.STORAGE_CLAIMS, "team-a/data", deleted=True))
    await publisher.wait_for(lambda s: s.topic == topics.STORAGE_CLAIMS.name and s.event is None)
