"""CSINodes -> storage.csinodes, keyed by node: each CSI driver's attach limit (NodeVolumeLimits), read as
`engine place --cluster` reads it; a PersistentVolume carries its CSI driver and volume handle.

Before, the cluster watcher did not watch CSINodes: the live placer never knew a node's volume limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from cluster_fakes import RecordingPublisher
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import CsiNodeEvent
from schemas.volumes import CsiVolume
from services.collector.cluster import storage
from services.collector.cluster.watcher import ClusterWatcher
from topoplace.cluster_objects.files import ClusterObject
from topoplace.cluster_objects.storage import csi_limits
from topoplace.dev.kubeapi import KubeApiServer, resources
from topoplace.kube_storage import CsiNodeObject, VolumeObject


def csi_node_body(node: str, *counts: tuple[str, int | None]) -> dict[str, Any]:
    drivers = [
        {"name": name, "nodeID": node, **({"allocatable": {"count": count}} if count is not None else {})}
        for name, count in counts
    ]
    return {"metadata": {"name": node}, "spec": {"drivers": drivers}}


def test_a_csinode_carries_each_drivers_limit_as_engine_place_reads_it() -> None:
    body = csi_node_body("n1", ("ebs.csi.aws.com", 25), ("efs.csi.aws.com", None))
    event, problems = storage.csi_node_event(msgspec.convert(body, CsiNodeObject), 1.0)
    assert problems == []
    assert event == CsiNodeEvent(node="n1", limits={"ebs.csi.aws.com": 25}, observed_at=1.0)  # no count: no limit
    assert csi_limits([ClusterObject(kind="CSINode", where="f.json", body=body)]) == {"n1": event.limits}


def test_a_negative_count_is_named_and_that_driver_left_without_a_limit() -> None:
    body = csi_node_body("n1", ("a.csi", -1), ("b.csi", 3))
    event, problems = storage.csi_node_event(msgspec.convert(body, CsiNodeObject), 1.0)
    assert [(p.object, p.field, p.reason) for p in problems] == [
        ("n1", "spec.drivers[0].allocatable.count", "must not be negative")
    ]
    assert event.limits == {"b.csi": 3}


def test_a_persistent_volume_carries_its_csi_driver_and_handle() -> None:
    body = {"metadata": {"name": "pv-1"}, "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}}}
    event, _ = storage.volume_event(msgspec.convert(body, VolumeObject), 1.0)
    assert event.volume.csi == CsiVolume(driver="ebs.csi.aws.com", handle="vol-1")


def test_a_gone_csinode_is_a_deleted_event_then_a_tombstone() -> None:
    tracker = storage.csi_node_tracker()
    tracker.observe(msgspec.convert(csi_node_body("n1", ("a.csi", 1)), CsiNodeObject), 1.0)
    deleted, tombstone = tracker.gone("n1", 2.0).publications
    assert (deleted.topic, deleted.key, tombstone.key) == (topics.STORAGE_CSINODES.name, "n1", "n1")
    assert isinstance(deleted.event, CsiNodeEvent) and deleted.event.deleted and tombstone.event is None


@pytest.fixture
async def running(kube_client: client.ApiClient, publisher: RecordingPublisher) -> AsyncIterator[ClusterWatcher]:
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.wait_ready(), 5)
    yield watcher
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_csinodes_reach_their_topic_keyed_by_node(
    kube_api: KubeApiServer, running: ClusterWatcher, publisher: RecordingPublisher
) -> None:
    kube_api.store.create(resources.CSINODES, csi_node_body("n1", ("ebs.csi.aws.com", 2)))
    (sent,) = await publisher.wait_for(lambda s: s.topic == topics.STORAGE_CSINODES.name and s.key == "n1")
    assert isinstance(sent.event, CsiNodeEvent) and sent.event.limits == {"ebs.csi.aws.com": 2}

    kube_api.store.delete(resources.CSINODES, "n1")
    await publisher.wait_for(
        lambda s: s.topic == topics.STORAGE_CSINODES.name and isinstance(s.event, CsiNodeEvent) and s.event.deleted
    )
    await publisher.wait_for(lambda s: s.topic == topics.STORAGE_CSINODES.name and s.event is None)
