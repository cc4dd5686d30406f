"""DRA: the binder re-checks a placement's devices against its own watch of every ResourceClaim before
it writes an allocation; a device another claim's allocation names (kube-scheduler's, or ours in flight)
is a CONFLICT naming the device and the claim, and nothing is written (test API server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from binder_support import FaultProxy, PodFactory, placement_for
from kubernetes_asyncio import client

from schemas.dra import ClaimAllocation, DeviceResult
from schemas.events import BindingOutcome, DeviceAssignment
from services.binder import metrics
from services.binder.apply import PodBinder
from services.binder.claim_watch import AllocatedDevices, ClaimObject, watch_claims
from services.binder.claims import ClaimWriter
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.dev.kubeapi import resources as kube_resources

NODE = "gpu-node-1"
DRIVER = "gpu.nvidia.com"
POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=5, deadline_seconds=10.0)
DEVICES = (DeviceAssignment(index=2, uuid="GPU-2"),)


async def no_sleep(seconds: float) -> None:
    return None


def make_claim(kube_api: KubeApiServer, name: str, namespace: str = "default") -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": DRIVER}}]}},
    }
    return kube_api.store.create(kube_resources.RESOURCECLAIMS, body, namespace=namespace)


def allocate_elsewhere(kube_api: KubeApiServer, name: str, *devices: str, admin: bool = False) -> dict[str, Any]:
    """A claim kube-scheduler allocated for a pod that is not ours (status written directly)."""
    claim = make_claim(kube_api, name, "team-b")
    results = [{"request": "gpus", "driver": DRIVER, "pool": NODE, "device": d} for d in devices]
    if admin:
        results = [{**r, "adminAccess": True} for r in results]
    claim["status"] = {
        "allocation": {"devices": {"results": results}},
        "reservedFor": [{"resource": "pods", "name": "web", "uid": "uid-of-web"}],
    }
    return kube_api.store.replace(kube_resources.RESOURCECLAIMS, name, claim, namespace="team-b", status_only=True)


def allocation_of(claim: dict[str, Any], *devices: str) -> ClaimAllocation:
    meta = claim["metadata"]
    return ClaimAllocation(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        results=tuple(DeviceResult(request="gpus", driver=DRIVER, pool=NODE, device=d) for d in devices),
    )


def status_of(kube_api: KubeApiServer, name: str, namespace: str = "default") -> dict[str, Any]:
    return kube_api.store.get(kube_resources.RESOURCECLAIMS, name, namespace).get("status") or {}


class WatchedClaims:
    """The binder's claim watch, straight to the test server, and a way to wait until it has seen something."""

    def __init__(self, api: client.ApiClient) -> None:
        self.allocated = AllocatedDevices()
        self._changed = asyncio.Condition()
        self._watch = watch_claims(client.ResourceV1Api(api), self.allocated, applied=self._applied)
        self._task = asyncio.create_task(self._watch.run())

    def _applied(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(notify())

    async def until(self, ready: Callable[[], bool]) -> None:
        await asyncio.wait_for(self._watch.listed.wait(), 5)
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(ready), 5)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@pytest.fixture
async def watched(kube_client: client.ApiClient) -> AsyncIterator[WatchedClaims]:
    claims = WatchedClaims(kube_client)
    yield claims
    await claims.stop()


@pytest.fixture
def binder(core: client.CoreV1Api, watched: WatchedClaims) -> PodBinder:
    dra = client.ResourceV1Api(core.api_client)  # type: ignore[attr-defined]  # the stubs omit it
    writer = ClaimWriter(dra, request_timeout=POLICY.request_timeout_seconds, allocated=watched.allocated)
    return PodBinder(core, policy=POLICY, sleep=no_sleep, claims=writer)


async def test_a_forged_placement_naming_another_claims_device_is_a_conflict_and_nothing_is_written(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, watched: WatchedClaims, proxy: FaultProxy
) -> None:
    allocate_elsewhere(kube_api, "web-gpu", "gpu-2")
    await watched.until(lambda: len(watched.allocated) == 1)
    pod, claim = make_pod("trainer"), make_claim(kube_api, "trainer-gpu")
    before = metrics.CLAIM_COLLISIONS._value.get()

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(allocation_of(claim, "gpu-2"),)))

    assert result.outcome is BindingOutcome.CONFLICT, result.reason
    assert "gpu.nvidia.com/gpu-node-1/gpu-2" in result.reason and "ResourceClaim team-b/web-gpu" in result.reason
    assert status_of(kube_api, "trainer-gpu") == {}
    assert proxy.calls("PUT", "/status") == []
    assert not kube_api.store.get(kube_resources.PODS, "trainer", "default")["spec"].get("nodeName")
    assert metrics.CLAIM_COLLISIONS._value.get() == before + 1


async def test_a_device_another_claim_does_not_name_is_allocated(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, watched: WatchedClaims
) -> None:
    allocate_elsewhere(kube_api, "web-gpu", "gpu-0", "gpu-1")
    allocate_elsewhere(kube_api, "monitor", "gpu-2", admin=True)  # adminAccess takes no device
    await watched.until(lambda: len(watched.allocated) == 2)
    pod, claim = make_pod("trainer"), make_claim(kube_api, "trainer-gpu")

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(allocation_of(claim, "gpu-2", "gpu-3"),)))

    assert result.outcome is BindingOutcome.BOUND, result.reason
    devices = [r["device"] for r in status_of(kube_api, "trainer-gpu")["allocation"]["devices"]["results"]]
    assert devices == ["gpu-2", "gpu-3"]


async def test_a_device_freed_by_a_deleted_claim_can_be_allocated_again(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, watched: WatchedClaims
) -> None:
    allocate_elsewhere(kube_api, "web-gpu", "gpu-2")
    await watched.until(lambda: len(watched.allocated) == 1)
    kube_api.store.delete(kube_resources.RESOURCECLAIMS, "web-gpu", namespace="team-b")
    await watched.until(lambda: len(watched.allocated) == 0)
    pod, claim = make_pod("trainer"), make_claim(kube_api, "trainer-gpu")

    result = await binder.bind(placement_for(pod, NODE, DEVICES, claims=(allocation_of(claim, "gpu-2"),)))

    assert result.outcome is BindingOutcome.BOUND, result.reason


async def test_two_placements_of_ours_naming_one_device_for_two_claims_never_both_allocate(
    kube_api: KubeApiServer, make_pod: PodFactory, binder: PodBinder, watched: WatchedClaims
) -> None:
    await watched.until(lambda: True)
    first, second = make_pod("first"), make_pod("second")
    claim_a, claim_b = make_claim(kube_api, "first-gpu"), make_claim(kube_api, "second-gpu")

    results = await asyncio.gather(
        binder.bind(placement_for(first, NODE, DEVICES, claims=(allocation_of(claim_a, "gpu-2"),))),
        binder.bind(placement_for(second, NODE, DEVICES, claims=(allocation_of(claim_b, "gpu-2"),))),
    )

    outcomes = sorted(r.outcome.value for r in results)
    assert outcomes == sorted([BindingOutcome.BOUND.value, BindingOutcome.CONFLICT.value])
    (refused,) = [r for r in results if r.outcome is BindingOutcome.CONFLICT]
    assert "gpu.nvidia.com/gpu-node-1/gpu-2" in refused.reason
    allocated = [n for n in ("first-gpu", "second-gpu") if status_of(kube_api, n).get("allocation")]
    assert len(allocated) == 1


async def test_an_allocation_of_ours_not_yet_seen_by_the_watch_still_holds_its_device(
    kube_api: KubeApiServer, make_pod: PodFactory, core: client.CoreV1Api
) -> None:
    # No watch at all: only the writer's own record of what it wrote keeps the device.
    allocated = AllocatedDevices()
    dra = client.ResourceV1Api(core.api_client)  # type: ignore[attr-defined]  # the stubs omit it
    writer = ClaimWriter(dra, request_timeout=POLICY.request_timeout_seconds, allocated=allocated)
    binder = PodBinder(core, policy=POLICY, sleep=no_sleep, claims=writer)
    first, second = make_pod("first"), make_pod("second")
    claim_a, claim_b = make_claim(kube_api, "first-gpu"), make_claim(kube_api, "second-gpu")

    bound = await binder.bind(placement_for(first, NODE, DEVICES, claims=(allocation_of(claim_a, "gpu-2"),)))
    refused = await binder.bind(placement_for(second, NODE, DEVICES, claims=(allocation_of(claim_b, "gpu-2"),)))

    assert bound.outcome is BindingOutcome.BOUND, bound.reason
    assert refused.outcome is BindingOutcome.CONFLICT
    assert "is being allocated to ResourceClaim default/first-gpu" in refused.reason


async def test_a_cluster_without_resource_claims_does_not_keep_the_watch_from_syncing(
    proxy: FaultProxy, core: client.CoreV1Api
) -> None:
    proxy.fail("GET", "/apis/resource.k8s.io/v1/resourceclaims", 404)
    allocated = AllocatedDevices()
    watch = watch_claims(client.ResourceV1Api(core.api_client), allocated)  # type: ignore[attr-defined]
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.wait_for(watch.listed.wait(), 5)
        assert len(allocated) == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --- the view alone -----------------------------------------------------------------------------


def claim_object(uid: str, *devices: str, allocated: bool = True) -> ClaimObject:
    results = [{"driver": DRIVER, "pool": NODE, "device": d} for d in devices]
    status = {"allocation": {"devices": {"results": results}}} if allocated else {}
    return msgspec.convert({"metadata": {"uid": uid, "namespace": "ns", "name": uid}, "status": status}, ClaimObject)


KEY = (DRIVER, NODE, "gpu-0")


def test_our_write_is_held_until_the_watch_shows_the_claim_allocated() -> None:
    view = AllocatedDevices()
    assert view.reserve("mine", "ns/mine", [KEY]) is None
    view.written("mine")
    assert view.reserve("other", "ns/other", [KEY]) is not None
    view.apply("MODIFIED", claim_object("mine", allocated=False))  # an older state: still held
    assert view.reserve("other", "ns/other", [KEY]) is not None
    view.apply("MODIFIED", claim_object("mine", "gpu-0"))  # the watch has it: held as the cluster's now
    collision = view.reserve("other", "ns/other", [KEY])
    assert collision is not None and not collision.in_flight
    view.apply("DELETED", claim_object("mine", "gpu-0"))
    assert view.reserve("other", "ns/other", [KEY]) is None


def test_a_write_the_watch_never_confirms_is_let_go_after_a_while() -> None:
    now = [0.0]
    view = AllocatedDevices(clock=lambda: now[0], confirm_seconds=60.0)
    view.reserve("mine", "ns/mine", [KEY])
    assert view.reserve("other", "ns/other", [KEY]) is not None  # in flight: never expires
    view.written("mine")
    now[0] = 59.0
    assert view.reserve("other", "ns/other", [KEY]) is not None
    now[0] = 61.0
    assert view.reserve("other", "ns/other", [KEY]) is None


def test_a_relist_forgets_the_claims_it_no_longer_has() -> None:
    view = AllocatedDevices()
    view.replace([claim_object("a", "gpu-0"), claim_object("b", "gpu-1")])
    view.replace([claim_object("b", "gpu-1")])
    assert len(view) == 1
    assert view.reserve("c", "ns/c", [KEY]) is None
    assert view.reserve("c", "ns/c", [(DRIVER, NODE, "gpu-1")]) is not None
