"""HAMi enforcement: HAMi's annotations in HAMi's format, and HAMi's node lock, against the test API server."""

from __future__ import annotations

from typing import Any

import pytest
from binder_support import FaultProxy, PodFactory, placement_for
from kubernetes_asyncio import client

from schemas import hami
from schemas.enforcement import HAMI_REGISTER_ANNOTATION, Enforcement
from schemas.events import BindingOutcome, DeviceAssignment, PlacementEvent
from services.binder.apply import PodBinder
from services.binder.hami_devices import hami_annotations
from services.binder.hami_lock import NodeLocker
from services.binder.retry import BackoffPolicy, RetryBudget
from topoplace.dev.kubeapi import KubeApiServer

NODE = "hami-node-1"
NOW = 1_790_000_000.0
POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=5, deadline_seconds=10.0)
MEMORY = {0: 81_920, 1: 81_920}
SHARE = DeviceAssignment(index=0, uuid="GPU-aaaa", memory_mib=4000, cores=30)
WHOLE = (DeviceAssignment(index=0, uuid="GPU-aaaa"), DeviceAssignment(index=1, uuid="GPU-bbbb"))


async def no_sleep(seconds: float) -> None:
    return None


def device_memory(node: str, index: int) -> int | None:
    return MEMORY.get(index) if node == NODE else None


def device_uuid(node: str, index: int) -> str | None:
    """The UUIDs of NODE's topology."""
    return {0: "GPU-aaaa", 1: "GPU-bbbb"}.get(index, f"GPU-{index}") if node == NODE else None


def make_node(kube_api: KubeApiServer, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body = {
        "metadata": {"name": NODE, "annotations": annotations or {}},
        "status": {"allocatable": {"nvidia.com/gpu": "20"}},
    }
    return kube_api.store.create("nodes", body)


def node_annotations(kube_api: KubeApiServer) -> dict[str, str]:
    return dict(kube_api.store.get("nodes", NODE)["metadata"].get("annotations") or {})


def binder(core: client.CoreV1Api, clock: float = NOW) -> PodBinder:
    return PodBinder(
        core,
        policy=POLICY,
        sleep=no_sleep,
        wall_clock=lambda: clock,
        device_memory=device_memory,
        device_uuid=device_uuid,
    )


def locker(core: client.CoreV1Api, clock: float = NOW) -> NodeLocker:
    from services.binder.apply import raw_call

    return NodeLocker(core, raw_call, wall_clock=lambda: clock)


def budget() -> RetryBudget:
    return RetryBudget(POLICY)


def one_share_each(pods: list[dict[str, Any]]) -> list[PlacementEvent]:
    """HAMi placements on NODE, pod i taking a share of device i."""
    return [
        placement_for(
            pod,
            NODE,
            (DeviceAssignment(index=i, uuid=device_uuid(NODE, i) or "", memory_mib=100, cores=10),),
            enforcement=Enforcement.HAMI,
        )
        for i, pod in enumerate(pods)
    ]


# --- the annotations, against HAMi's documented examples ------------------------------------------


def test_a_share_is_written_as_hamis_documented_example(make_pod: PodFactory) -> None:
    placement = placement_for(make_pod(), NODE, (SHARE,), enforcement=Enforcement.HAMI)
    notes = hami_annotations(placement, device_memory, NOW, device_uuid=device_uuid)
    assert isinstance(notes, dict)
    assert notes[hami.DEVICES_TO_ALLOCATE] == "GPU-aaaa,NVIDIA,4000,30:;"
    assert notes[hami.DEVICES_ALLOCATED] == notes[hami.DEVICES_TO_ALLOCATE]
    assert notes[hami.VGPU_NODE] == NODE
    assert notes[hami.VGPU_TIME] == notes[hami.BIND_TIME] == "1790000000"
    assert notes[hami.BIND_PHASE] == "allocating"


def test_whole_gpus_carry_their_full_memory_and_all_cores(make_pod: PodFactory) -> None:
    placement = placement_for(make_pod(), NODE, WHOLE, enforcement=Enforcement.HAMI)
    notes = hami_annotations(placement, device_memory, NOW, device_uuid=device_uuid)
    assert isinstance(notes, dict)
    assert notes[hami.DEVICES_TO_ALLOCATE] == "GPU-aaaa,NVIDIA,81920,100:GPU-bbbb,NVIDIA,81920,100:;"
    assert hami.decode_pod_devices(notes[hami.DEVICES_TO_ALLOCATE]) == (
        (
            hami.HamiDevice(uuid="GPU-aaaa", memory_mib=81_920, cores=100),
            hami.HamiDevice(uuid="GPU-bbbb", memory_mib=81_920, cores=100),
        ),
    )


def test_several_containers_are_each_closed_by_a_semicolon() -> None:
    first = [hami.HamiDevice(uuid="GPU-1", memory_mib=1000, cores=30)]
    second = [
        hami.HamiDevice(uuid="GPU-2", memory_mib=2000, cores=0),
        hami.HamiDevice(uuid="GPU-3", memory_mib=3, cores=1),
    ]
    text = hami.encode_pod_devices([first, [], second])
    assert text == "GPU-1,NVIDIA,1000,30:;;GPU-2,NVIDIA,2000,0:GPU-3,NVIDIA,3,1:;"
    assert hami.decode_pod_devices(text) == (tuple(first), tuple(second))  # HAMi skips empty lists


def test_what_hami_cannot_enforce_is_refused_by_name(make_pod: PodFactory) -> None:
    elsewhere = placement_for(make_pod(), "elsewhere", (DeviceAssignment(index=0),), enforcement=Enforcement.HAMI)
    assert "no UUID in its topology" in str(hami_annotations(elsewhere, device_memory, NOW, device_uuid=device_uuid))
    unknown = placement_for(make_pod(), "elsewhere", WHOLE, enforcement=Enforcement.HAMI)
    notes = hami_annotations(
        unknown, device_memory, NOW, device_uuid=lambda node, index: ("GPU-aaaa", "GPU-bbbb")[index]
    )
    assert "memory of device 0 on elsewhere is unknown" in str(notes)


def test_hami_is_given_the_topologys_gpu_never_the_placements_text(make_pod: PodFactory) -> None:
    # No UUID in the placement: the topology's UUID for the index goes to HAMi.
    plain = placement_for(make_pod(), NODE, (DeviceAssignment(index=1),), enforcement=Enforcement.HAMI)
    notes = hami_annotations(plain, device_memory, NOW, device_uuid=device_uuid)
    assert isinstance(notes, dict) and notes[hami.DEVICES_TO_ALLOCATE] == "GPU-bbbb,NVIDIA,81920,100:;"
    # A free index named with a held GPU's UUID: refused, HAMi is never told that UUID.
    forged = placement_for(
        make_pod(), NODE, (DeviceAssignment(index=1, uuid="GPU-aaaa"),), enforcement=Enforcement.HAMI
    )
    assert hami_annotations(forged, device_memory, NOW, device_uuid=device_uuid) == (
        f"device 1 on {NODE} is GPU-bbbb, not GPU-aaaa"
    )

    with pytest.raises(ValueError, match="uuid"):
        hami.encode_container_devices([hami.HamiDevice(uuid="GPU-1,x", memory_mib=1, cores=1)])


def test_node_lock_value_is_rfc3339_namespace_pod() -> None:
    value = hami.format_node_lock(NOW, "team-a", "trainer-0")
    assert value == "2026-09-21T14:13:20Z,team-a,trainer-0"
    lock = hami.parse_node_lock(value)
    assert (lock.taken_at, lock.namespace, lock.name) == (NOW, "team-a", "trainer-0")
    assert hami.parse_node_lock("2026-09-21T16:13:20+02:00").taken_at == NOW  # older HAMi: a time alone
    assert not lock.expired(NOW + 300) and lock.expired(NOW + 301)
    for bad in ("yesterday,a,b", "2026-09-21T14:13:20Z,a", "2026-09-21T14:13:20,a,b"):
        with pytest.raises(ValueError, match="mutex.lock"):
            hami.parse_node_lock(bad)


# --- the node lock ------------------------------------------------------------------------------


async def test_lock_is_taken_with_the_nodes_resource_version_and_released(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy
) -> None:
    node = make_node(kube_api)
    taken = await locker(core).acquire(NODE, "default", "p1", budget())
    assert taken.taken and not taken.hami_plugin
    assert node_annotations(kube_api)[hami.NODE_LOCK] == hami.format_node_lock(NOW, "default", "p1")
    patch = proxy.calls("PATCH", f"/nodes/{NODE}")[0]
    assert patch.status == 200
    assert int(kube_api.store.get("nodes", NODE)["metadata"]["resourceVersion"]) > int(
        node["metadata"]["resourceVersion"]
    )
    assert await locker(core).release(NODE, "default", "p1", budget())
    assert hami.NODE_LOCK not in node_annotations(kube_api)


async def test_a_lock_held_by_another_pod_is_a_conflict_and_stays(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    make_pod("other")  # pending: another scheduler is between its lock and its binding
    held = hami.format_node_lock(NOW - 10, "default", "other")
    make_node(kube_api, {hami.NODE_LOCK: held})
    result = await locker(core).acquire(NODE, "default", "p1", budget())
    assert not result.taken
    assert "locked by default/other" in result.reason
    assert not await locker(core).release(NODE, "default", "p1", budget())  # not ours: left alone
    assert node_annotations(kube_api)[hami.NODE_LOCK] == held


async def test_the_lock_of_a_pod_that_is_gone_is_taken_over(core: client.CoreV1Api, kube_api: KubeApiServer) -> None:
    make_node(kube_api, {hami.NODE_LOCK: hami.format_node_lock(NOW - 1, "default", "deleted-meanwhile")})
    assert (await locker(core).acquire(NODE, "default", "p1", budget())).taken
    assert hami.parse_node_lock(node_annotations(kube_api)[hami.NODE_LOCK]).name == "p1"


@pytest.mark.parametrize(
    ("age", "holder_on_node", "plugin", "taken"),
    [
        (10.0, False, False, False),  # young: its binder may still bind it
        (61.0, False, False, True),  # its binder died before binding: no plugin will ever see it
        (61.0, False, True, True),  # the same on a node with HAMi's plugin: never bound there
        (61.0, True, False, True),  # bound, no plugin to release it, its binder gone
        (61.0, True, True, False),  # bound on a HAMi node: the plugin releases it in Allocate
        (299.0, True, True, False),
    ],
)
async def test_a_lock_nobody_will_release_is_taken_over_after_a_minute(
    core: client.CoreV1Api,
    kube_api: KubeApiServer,
    make_pod: PodFactory,
    age: float,
    holder_on_node: bool,
    plugin: bool,
    taken: bool,
) -> None:
    make_pod("holder", node=NODE if holder_on_node else None)
    notes = {hami.NODE_LOCK: hami.format_node_lock(NOW - age, "default", "holder")}
    make_node(kube_api, {**notes, HAMI_REGISTER_ANNOTATION: "[]"} if plugin else notes)
    result = await locker(core).acquire(NODE, "default", "p1", budget())
    assert result.taken is taken
    holder = hami.parse_node_lock(node_annotations(kube_api)[hami.NODE_LOCK]).name
    assert holder == ("p1" if taken else "holder")


async def test_an_expired_lock_is_taken_over(core: client.CoreV1Api, kube_api: KubeApiServer) -> None:
    make_node(kube_api, {hami.NODE_LOCK: hami.format_node_lock(NOW - 301, "default", "other")})
    assert (await locker(core).acquire(NODE, "default", "p1", budget())).taken
    assert hami.parse_node_lock(node_annotations(kube_api)[hami.NODE_LOCK]).name == "p1"


async def test_a_stale_resource_version_is_read_again(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy
) -> None:
    make_node(kube_api)
    original = core.read_node

    async def read_then_race(*args: Any, **kwargs: Any) -> Any:
        reply = await original(*args, **kwargs)
        if len(proxy.calls("GET", f"/nodes/{NODE}")) == 1:  # another writer changes the Node meanwhile
            node = kube_api.store.get("nodes", NODE)
            node["metadata"].setdefault("labels", {})["touched"] = "yes"
            kube_api.store.replace("nodes", NODE, node)
        return reply

    core.read_node = read_then_race  # type: ignore[method-assign]
    assert (await locker(core).acquire(NODE, "default", "p1", budget())).taken
    assert [c.status for c in proxy.calls("PATCH", f"/nodes/{NODE}")] == [409, 200]


# --- binding on a hami node ---------------------------------------------------------------------


async def test_pod_bound_on_a_hami_node_carries_hamis_annotations(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    make_node(kube_api)  # labelled hami, no HAMi plugin registered: the lock goes right after binding
    pod = make_pod()
    pods = binder(core)
    result = await pods.bind(placement_for(pod, NODE, (SHARE, WHOLE[1]), enforcement=Enforcement.HAMI))
    await pods.drain_releases()
    assert result.outcome is BindingOutcome.BOUND
    notes = kube_api.store.get("pods", pod["metadata"]["name"], "default")["metadata"]["annotations"]
    assert notes[hami.DEVICES_TO_ALLOCATE] == "GPU-aaaa,NVIDIA,4000,30:GPU-bbbb,NVIDIA,81920,100:;"
    assert notes[hami.DEVICES_ALLOCATED] == notes[hami.DEVICES_TO_ALLOCATE]
    assert (notes[hami.VGPU_NODE], notes[hami.BIND_PHASE], notes[hami.BIND_TIME]) == (NODE, "allocating", "1790000000")
    # still one binding request for the pod; the lock was taken before it and released after
    assert [s.status for s in proxy.calls("POST", "/binding")] == [201]
    order = [(s.method, s.path.rsplit("/", 1)[-1]) for s in proxy.log if s.method in ("PATCH", "POST")]
    assert order == [("PATCH", NODE), ("POST", "binding"), ("PATCH", NODE)]
    assert hami.NODE_LOCK not in node_annotations(kube_api)


async def test_with_hamis_plugin_the_lock_waits_for_it(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    make_node(kube_api, {HAMI_REGISTER_ANNOTATION: "[]"})
    waits: list[float] = []

    async def recorded_sleep(seconds: float) -> None:
        waits.append(seconds)

    pods = PodBinder(
        core,
        policy=POLICY,
        sleep=recorded_sleep,
        wall_clock=lambda: NOW,
        device_memory=device_memory,
        device_uuid=device_uuid,
        lock_release_seconds=42.0,
    )
    pod = make_pod()
    result = await pods.bind(placement_for(pod, NODE, (SHARE,), enforcement=Enforcement.HAMI))
    assert result.outcome is BindingOutcome.BOUND
    # HAMi's device plugin releases it in Allocate; until then it stands
    assert hami.parse_node_lock(node_annotations(kube_api)[hami.NODE_LOCK]).name == pod["metadata"]["name"]
    await pods.drain_releases()
    assert waits == [42.0]
    assert hami.NODE_LOCK not in node_annotations(kube_api)  # the plugin did not here: the fallback did


async def test_a_locked_node_is_not_bound(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    make_pod("other")
    make_node(kube_api, {hami.NODE_LOCK: hami.format_node_lock(NOW, "default", "other")})
    pod = make_pod()
    result = await binder(core).bind(placement_for(pod, NODE, (SHARE,), enforcement=Enforcement.HAMI))
    assert result.outcome is BindingOutcome.CONFLICT and "locked by default/other" in result.reason
    assert proxy.calls("POST", "/binding") == []
    assert not kube_api.store.get("pods", pod["metadata"]["name"], "default")["spec"].get("nodeName")


async def test_device_plugin_nodes_get_no_hami_annotations_and_no_lock(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    make_node(kube_api)
    pod = make_pod()
    result = await binder(core).bind(placement_for(pod, NODE, (SHARE,)))
    assert result.outcome is BindingOutcome.BOUND
    notes = kube_api.store.get("pods", pod["metadata"]["name"], "default")["metadata"]["annotations"]
    assert not [k for k in notes if k.startswith("hami.io/")]
    assert proxy.calls("PATCH", f"/nodes/{NODE}") == []


async def test_our_pods_of_one_node_bind_one_after_another(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    import asyncio

    make_node(kube_api)
    pods = binder(core)
    placed = one_share_each([make_pod() for _ in range(4)])
    results = await asyncio.gather(*(pods.bind(p) for p in placed))
    await pods.drain_releases()
    assert [r.outcome for r in results] == [BindingOutcome.BOUND] * 4  # none met another's lock
    assert hami.NODE_LOCK not in node_annotations(kube_api)


async def test_a_failed_binding_releases_the_lock_before_the_next_pod_of_the_node(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    import asyncio

    make_node(kube_api)
    pods = binder(core)
    first, second = make_pod(), make_pod()
    proxy.fail("POST", f"/pods/{first['metadata']['name']}/binding", 503, times=POLICY.max_attempts)
    placed = one_share_each([first, second])
    results = await asyncio.gather(*(pods.bind(p) for p in placed))
    await pods.drain_releases()
    assert results[0].outcome is BindingOutcome.FAILED and "gave up" in results[0].reason
    assert results[1].outcome is BindingOutcome.BOUND  # it did not meet the failed pod's lock
    assert hami.NODE_LOCK not in node_annotations(kube_api)


async def test_a_pod_queued_behind_another_of_its_node_keeps_its_whole_retry_budget(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    import asyncio

    # Every wait is the policy's whole ceiling (4 s of a 10 s deadline), on a clock the waits advance.
    policy = BackoffPolicy(base_seconds=4.0, cap_seconds=4.0, max_attempts=5, deadline_seconds=10.0)
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    make_node(kube_api)
    pods = PodBinder(
        core,
        policy=policy,
        sleep=sleep,
        clock=lambda: now[0],
        rand=lambda: 1.0,
        device_memory=device_memory,
        device_uuid=device_uuid,
    )
    first, second = make_pod(), make_pod()
    # The first binds at its third try, 8 s on; the second, queued all that time, fails its first try.
    proxy.fail("POST", f"/pods/{first['metadata']['name']}/binding", 503, times=2)
    proxy.fail("POST", f"/pods/{second['metadata']['name']}/binding", 503, times=1)
    placed = one_share_each([first, second])
    results = await asyncio.gather(*(pods.bind(p) for p in placed))
    await pods.drain_releases()
    assert [(r.outcome, r.attempts) for r in results] == [(BindingOutcome.BOUND, 3), (BindingOutcome.BOUND, 2)]
