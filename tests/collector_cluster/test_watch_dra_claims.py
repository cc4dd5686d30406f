"""Allocated ResourceClaims of every scheduler -> resources.claims: only the allocated devices, keyed
by claim uid, a deleted event and a tombstone when the claim is deleted or deallocated."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from cluster_fakes import RecordingPublisher, Sent
from kubernetes_asyncio import client

from schemas import topics
from schemas.dra import AllocatedDevice
from schemas.dra_objects import AllocationResult
from schemas.events import AllocatedClaimEvent
from services.collector.cluster.dra import ResourceClaim, allocated_claim_event, allocated_claim_tracker
from services.collector.cluster.watcher import ClusterWatcher
from topoplace.dev.kubeapi import KubeApiServer, resources

DRIVER = "gpu.nvidia.com"


def allocation(node: str, *devices: str, admin: tuple[str, ...] = ()) -> dict[str, Any]:
    results = [{"request": "gpu", "driver": DRIVER, "pool": node, "device": d} for d in devices]
    results += [{"request": "gpu", "driver": DRIVER, "pool": node, "device": d, "adminAccess": True} for d in admin]
    return {
        "devices": {"results": results, "config": [{"source": "FromClass", "opaque": {"driver": DRIVER}}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        },
    }


def claim_body(name: str, namespace: str = "team-b") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }


def test_an_allocated_claim_carries_only_its_devices_its_node_and_admin_access() -> None:
    body = {
        **claim_body("web-gpu"),
        "metadata": {"name": "web-gpu", "namespace": "team-b", "uid": "u-1"},
        "status": {
            "allocation": allocation("n1", "gpu-0", admin=("gpu-1",)),
            "reservedFor": [{"resource": "pods", "name": "web", "uid": "p-1"}],
        },
    }
    event, problems = allocated_claim_event(msgspec.convert(body, ResourceClaim), 3.0)
    assert problems == []
    assert event == AllocatedClaimEvent(
        uid="u-1",
        namespace="team-b",
        name="web-gpu",
        node="n1",
        devices=(
            AllocatedDevice(driver=DRIVER, pool="n1", device="gpu-0"),
            AllocatedDevice(driver=DRIVER, pool="n1", device="gpu-1", admin_access=True),
        ),
        allocation=msgspec.convert(body["status"]["allocation"], AllocationResult),
        observed_at=3.0,
    )


def test_a_result_without_its_device_is_left_out_and_named() -> None:
    body = {
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1"}]}}},
    }
    event, problems = allocated_claim_event(msgspec.convert(body, ResourceClaim), 1.0)
    assert event.devices == () and event.node == ""
    assert [(p.field, p.reason) for p in problems] == [("status.allocation.devices.results[0]", "no device")]


def test_a_gone_claim_is_a_deleted_event_then_a_tombstone() -> None:
    tracker = allocated_claim_tracker()
    body = {"metadata": {"name": "c", "namespace": "ns", "uid": "u"}, "status": {"allocation": allocation("n1", "x")}}
    tracker.observe(msgspec.convert(body, ResourceClaim), 1.0)
    deleted, tombstone = tracker.gone("u", 2.0).publications
    assert (deleted.topic, deleted.key, tombstone.key) == (topics.RESOURCE_CLAIMS.name, "u", "u")
    assert isinstance(deleted.event, AllocatedClaimEvent) and deleted.event.deleted and not deleted.event.devices
    assert tombstone.event is None


# --- against the test API server ----------------------------------------------------------------


def claim_sent(name: str, *, deleted: bool = False) -> Callable[[Sent], bool]:
    return lambda s: (
        s.topic == topics.RESOURCE_CLAIMS.name
        and isinstance(s.event, AllocatedClaimEvent)
        and s.event.name == name
        and s.event.deleted is deleted
    )


@pytest.fixture
async def running(kube_client: client.ApiClient, publisher: RecordingPublisher) -> AsyncIterator[ClusterWatcher]:
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.wait_ready(), 5)
    yield watcher
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def allocate(kube_api: KubeApiServer, name: str, node: str, *devices: str, namespace: str = "team-b") -> str:
    """A claim allocated by someone else (kube-scheduler): created, then its status written."""
    created = kube_api.store.create(resources.RESOURCECLAIMS, claim_body(name, namespace), namespace=namespace)
    reserved = [{"resource": "pods", "name": "web", "uid": "p-web"}]
    status = {"allocation": allocation(node, *devices), "reservedFor": reserved}
    kube_api.store.replace(
        resources.RESOURCECLAIMS, name, {**created, "status": status}, namespace=namespace, status_only=True
    )
    return str(created["metadata"]["uid"])


async def test_an_allocated_claim_is_published_by_uid_and_an_unallocated_one_is_not(
    kube_api: KubeApiServer, running: ClusterWatcher, publisher: RecordingPublisher
) -> None:
    uid = allocate(kube_api, "web-gpu", "n1", "gpu-0", "gpu-1")
    kube_api.store.create(resources.RESOURCECLAIMS, claim_body("waiting"), namespace="team-b")

    (sent,) = await publisher.wait_for(claim_sent("web-gpu"))

    assert sent.key == uid
    assert isinstance(sent.event, AllocatedClaimEvent)
    assert [d.device for d in sent.event.devices] == ["gpu-0", "gpu-1"] and sent.event.node == "n1"
    assert not publisher.matching(claim_sent("waiting"))


async def test_a_deallocated_claim_and_a_deleted_claim_are_tombstoned(
    kube_api: KubeApiServer, running: ClusterWatcher, publisher: RecordingPublisher
) -> None:
    first = allocate(kube_api, "a", "n1", "gpu-0")
    second = allocate(kube_api, "b", "n1", "gpu-1")
    await publisher.wait_for(claim_sent("a"))
    await publisher.wait_for(claim_sent("b"))

    current = kube_api.store.get(resources.RESOURCECLAIMS, "a", "team-b")
    kube_api.store.replace(
        resources.RESOURCECLAIMS, "a", {**current, "status": {}}, namespace="team-b", status_only=True
    )
    kube_api.store.delete(resources.RESOURCECLAIMS, "b", namespace="team-b")

    await publisher.wait_for(claim_sent("a", deleted=True))
    await publisher.wait_for(claim_sent("b", deleted=True))
    await publisher.wait_for(lambda s: s.topic == topics.RESOURCE_CLAIMS.name and s.event is None, count=2)
    tombstones = {s.key for s in publisher.sent if s.topic == topics.RESOURCE_CLAIMS.name and s.event is None}
    assert tombstones == {first, second}


async def test_a_claim_deallocated_while_the_watcher_was_away_is_tombstoned_at_the_first_list(
    kube_api: KubeApiServer, kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    live = allocate(kube_api, "live", "n1", "gpu-2")
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    stale = AllocatedClaimEvent(
        uid="gone-uid",
        namespace="team-b",
        name="gone",
        devices=(AllocatedDevice(driver=DRIVER, pool="n1", device="x"),),
    )
    watcher.seed({topics.RESOURCE_CLAIMS.name: [stale]})
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_ready(), 5)
        assert publisher.matching(claim_sent("gone", deleted=True))
        assert [s.key for s in publisher.matching(claim_sent("live"))] == [live]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
