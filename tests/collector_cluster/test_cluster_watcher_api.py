"""The watcher against the test API server, with a recording publisher in place of Kafka."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from cluster_fakes import CoreApi, CustomApi, RecordingPublisher, Sent
from cluster_objects import container, hypernode, hypernode_json, node_json, pod_json, podgroup_json, topology_json
from crd_types import PODGROUPS, TOPOLOGIES, server_with
from decision_keys import TEST_KEY
from kube_clients import client_for
from kubernetes_asyncio import client

from schemas import annotations as pod_annotations
from schemas import topics
from schemas.events import (
    DeviceAssignment,
    HyperNodeEvent,
    LifecyclePhase,
    NetworkConstraint,
    NodeStatusEvent,
    PendingGangEvent,
    PendingPodEvent,
    PodLifecycleEvent,
    TopologyLevelsEvent,
    TopologyMode,
)
from schemas.seal import SEAL
from schemas.topics import Topic
from services.collector.cluster import gangs
from services.collector.cluster.metrics import INFORMER_METRICS, RELISTS
from services.collector.cluster.objects import Pod
from services.collector.cluster.publish import BAD_FIELDS
from services.collector.cluster.watcher import ClusterWatcher
from topoplace.dev.kubeapi import KubeApiServer, ObjectStore, resources
from topoplace.dev.kubeapi.faults import FaultPlan
from topoplace.informer import Informer

GROUP, VERSION, PLURAL = "topology.volcano.sh", "v1alpha1", "hypernodes"


def pending(name: str) -> Callable[[Sent], bool]:
    return lambda s: (
        s.topic == topics.PODS_PENDING.name and isinstance(s.event, PendingPodEvent) and s.event.name == name
    )


def lifecycle(name: str, phase: LifecyclePhase) -> Callable[[Sent], bool]:
    return lambda s: (
        s.topic == topics.PODS_LIFECYCLE.name
        and isinstance(s.event, PodLifecycleEvent)
        and s.event.name == name
        and s.event.phase is phase
    )


def api_pod(name: str, **kw: Any) -> dict[str, Any]:
    body = pod_json(name, **kw)
    for field in ("uid", "resourceVersion"):
        body["metadata"].pop(field)  # the server assigns them
    return body


async def start(watcher: ClusterWatcher) -> asyncio.Task[None]:
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.wait_ready(), 5)
    return task


@pytest.fixture
async def running(kube_client: client.ApiClient, publisher: RecordingPublisher) -> AsyncIterator[ClusterWatcher]:
    watcher = ClusterWatcher(
        kube_client, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30, decision_key=TEST_KEY
    )
    task = await start(watcher)
    yield watcher
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_pending_pods_from_the_list_and_from_the_watch(
    kube_api: KubeApiServer, kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    kube_api.store.create("pods", api_pod("early"), namespace="default")
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60)
    task = await start(watcher)
    try:
        core: CoreApi = client.CoreV1Api(kube_client)
        await core.create_namespaced_pod("default", api_pod("theirs", scheduler="default-scheduler"))
        late = await core.create_namespaced_pod("ml", api_pod("late", namespace="ml"))
        await publisher.wait_for(pending("late"))
        early = await publisher.wait_for(pending("early"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    event = publisher.matching(pending("late"))[0]
    assert event.key == late.metadata.uid
    assert isinstance(event.event, PendingPodEvent) and event.event.requests == {"nvidia.com/gpu": "1"}
    assert len(early) == 1
    # the other scheduler's pod came before ours on the same watch, and was not published
    assert publisher.matching(lambda s: getattr(s.event, "name", "") == "theirs") == []


async def test_annotate_bind_delete(
    kube_client: client.ApiClient, publisher: RecordingPublisher, running: ClusterWatcher
) -> None:
    core: CoreApi = client.CoreV1Api(kube_client)
    pod = await core.create_namespaced_pod("default", api_pod("job-0"))
    await publisher.wait_for(pending("job-0"))
    devices = (DeviceAssignment(index=0, uuid="GPU-a"), DeviceAssignment(index=1, uuid="GPU-b"))
    # what the binder does: annotate, then bind
    await core.patch_namespaced_pod(
        "job-0",
        "default",
        {
            "metadata": {
                "annotations": {
                    pod_annotations.DEVICES: pod_annotations.encode_devices(devices),
                    pod_annotations.NODE: "gpu-1",
                    SEAL: TEST_KEY.seal(pod.metadata.uid, "gpu-1", "d-1", devices),
                }
            }
        },
    )
    await core.create_namespaced_pod_binding(
        "job-0",
        "default",
        {"metadata": {"name": "job-0", "uid": pod.metadata.uid}, "target": {"kind": "Node", "name": "gpu-1"}},
    )
    bound = (await publisher.wait_for(lifecycle("job-0", LifecyclePhase.BOUND)))[0]
    assert isinstance(bound.event, PodLifecycleEvent)
    assert bound.key == pod.metadata.uid and bound.event.node == "gpu-1" and bound.event.devices == devices
    await core.delete_namespaced_pod("job-0", "default")
    deleted = (await publisher.wait_for(lifecycle("job-0", LifecyclePhase.DELETED)))[0]
    assert (
        isinstance(deleted.event, PodLifecycleEvent)
        and deleted.event.node == "gpu-1"
        and deleted.key == pod.metadata.uid
    )
    # the annotation written before binding did not re-publish the pending pod
    assert len(publisher.matching(pending("job-0"))) == 1


async def test_undecodable_devices_are_counted_and_bound_without_devices(
    kube_client: client.ApiClient, publisher: RecordingPublisher, running: ClusterWatcher
) -> None:
    field = f"metadata.annotations[{pod_annotations.DEVICES}]".split("[")[0]
    before = BAD_FIELDS.labels(field=field)._value.get()
    core: CoreApi = client.CoreV1Api(kube_client)
    await core.create_namespaced_pod(
        "default", api_pod("bad", node="gpu-2", annotations={pod_annotations.DEVICES: "{oops"})
    )
    bound = (await publisher.wait_for(lifecycle("bad", LifecyclePhase.BOUND)))[0]
    assert isinstance(bound.event, PodLifecycleEvent) and bound.event.devices == () and bound.event.node == "gpu-2"
    assert BAD_FIELDS.labels(field=field)._value.get() == before + 1


async def test_nodes(kube_client: client.ApiClient, publisher: RecordingPublisher, running: ClusterWatcher) -> None:
    core: CoreApi = client.CoreV1Api(kube_client)

    def status(name: str, **want: object) -> Callable[[Sent], bool]:
        return lambda s: (
            isinstance(s.event, NodeStatusEvent)
            and s.event.node == name
            and all(getattr(s.event, k) == v for k, v in want.items())
        )

    await core.create_node(node_json("gpu-7", labels={"zone": "a"}))
    added = (await publisher.wait_for(status("gpu-7")))[0]
    assert added.topic == topics.NODES_STATUS.name and added.key == "gpu-7"
    assert (
        isinstance(added.event, NodeStatusEvent)
        and added.event.allocatable["nvidia.com/gpu"] == "8"
        and added.event.ready
    )
    await core.patch_node("gpu-7", {"spec": {"unschedulable": True}})
    await publisher.wait_for(status("gpu-7", unschedulable=True))
    await core.delete_node("gpu-7")
    await publisher.wait_for(status("gpu-7", deleted=True))


async def test_hypernodes_from_the_crd(
    kube_client: client.ApiClient, publisher: RecordingPublisher, running: ClusterWatcher
) -> None:
    custom: CustomApi = client.CustomObjectsApi(kube_client)
    await custom.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, hypernode_json("tor-1", 1, [("Node", "n1"), ("Node", "n2")])
    )
    added = (await publisher.wait_for(lambda s: s.topic == topics.TOPOLOGY_NETWORK.name))[0]
    assert added.key == "tor-1" and isinstance(added.event, HyperNodeEvent)
    assert [m.name for m in added.event.members] == ["n1", "n2"] and added.event.tier == 1
    await custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "tor-1")
    out = await publisher.wait_for(lambda s: s.topic == topics.TOPOLOGY_NETWORK.name, count=3)
    assert isinstance(out[1].event, HyperNodeEvent) and out[1].event.deleted
    assert out[2] == Sent(topics.TOPOLOGY_NETWORK.name, "tor-1", None)


@pytest.fixture
async def no_crd_server() -> AsyncIterator[KubeApiServer]:
    served = [r for r in resources.ALL if r is not resources.HYPERNODES]
    async with KubeApiServer(served=served) as server:
        yield server


async def test_without_the_crd_the_watcher_is_ready_and_quiet(
    no_crd_server: KubeApiServer, publisher: RecordingPublisher
) -> None:
    api = client_for(no_crd_server.url)
    watcher = ClusterWatcher(api, publisher, scheduler_name="topoplace", resync_seconds=60)
    task = await start(watcher)
    try:
        no_crd_server.store.create("nodes", node_json("n1"))
        await publisher.wait_for(lambda s: s.topic == topics.NODES_STATUS.name)
        assert not task.done()
        assert publisher.matching(lambda s: s.topic == topics.TOPOLOGY_NETWORK.name) == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


async def test_hypernodes_from_a_file_instead(
    tmp_path: Path, no_crd_server: KubeApiServer, publisher: RecordingPublisher
) -> None:
    path = tmp_path / "hypernodes.yaml"
    path.write_text(
        "kind: List\nitems:\n"
        "- metadata: {name: tor-a}\n  spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}}]}\n"
        "- metadata: {name: tor-b}\n  spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n2}}}]}\n"
    )
    api = client_for(no_crd_server.url)
    watcher = ClusterWatcher(
        api, publisher, scheduler_name="topoplace", resync_seconds=60, hypernodes_file=str(path), file_poll_seconds=0.05
    )
    task = await start(watcher)
    try:
        first = await publisher.wait_for(lambda s: s.topic == topics.TOPOLOGY_NETWORK.name, count=2)
        assert sorted(str(s.key) for s in first) == ["tor-a", "tor-b"]
        path.write_text(
            "- metadata: {name: tor-a}\n"
            "  spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}}]}\n"
        )
        later = path.stat().st_mtime + 5
        os.utime(path, (later, later))  # a distinct mtime even on coarse clocks
        out = await publisher.wait_for(lambda s: s.topic == topics.TOPOLOGY_NETWORK.name and s.key == "tor-b", count=3)
        assert isinstance(out[1].event, HyperNodeEvent) and out[1].event.deleted and out[2].event is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


@pytest.fixture
async def quiet_server() -> AsyncIterator[KubeApiServer]:
    # no bookmarks during the test: the watcher must resume from the version it last saw
    async with KubeApiServer(store=ObjectStore(), bookmark_interval=3600) as server:
        yield server


async def test_410_relists_and_reconciles_what_the_watch_missed(
    quiet_server: KubeApiServer, publisher: RecordingPublisher
) -> None:
    store = quiet_server.store
    store.create("pods", api_pod("a"), namespace="default")
    api = client_for(quiet_server.url)
    watcher = ClusterWatcher(api, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    expired = RELISTS.labels(resource="pods", reason="expired")
    relists_before = expired._value.get()
    task = await start(watcher)
    try:
        await publisher.wait_for(pending("a"))
        # in one step, with no await: drop the watches, change things, compact the log
        store.close_watches()
        store.delete("pods", "a", namespace="default")
        store.create("pods", api_pod("b"), namespace="default")
        store.compact()
        await publisher.wait_for(pending("b"))
        await publisher.wait_for(lifecycle("a", LifecyclePhase.DELETED))
        assert expired._value.get() == relists_before + 1
        assert watcher.watches["pods"][0].lists == 2
        # and the watch goes on after the relist
        store.create("pods", api_pod("c"), namespace="default")
        await publisher.wait_for(pending("c"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


async def test_resync_republishes_pending_pods(
    kube_api: KubeApiServer, kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    kube_api.store.create("pods", api_pod("waiting"), namespace="default")
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=0.3, watch_timeout=30)
    task = await start(watcher)
    try:
        again = await publisher.wait_for(pending("waiting"), count=2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert again[0].key == again[1].key
    assert watcher.watches["pods"][0].lists >= 2


async def test_list_watch_retries_while_the_api_server_is_away_and_resumes(publisher: RecordingPublisher) -> None:
    store = ObjectStore()
    first = KubeApiServer(store=store)
    url = await first.start()
    port = int(url.rsplit(":", 1)[1])
    api = client_for(url)
    core: CoreApi = client.CoreV1Api(api)
    refused = asyncio.Event()

    async def list_pods(**kw: Any) -> Any:
        try:
            return await core.list_pod_for_all_namespaces(**kw)
        except aiohttp.ClientConnectionError:
            refused.set()
            raise

    seen: list[tuple[str, str]] = []
    changed = asyncio.Condition()

    async def on_list(pods: list[Pod], resync: bool) -> None:
        async with changed:
            seen.extend(("LISTED", p.metadata.name) for p in pods)
            changed.notify_all()

    async def on_change(kind: str, pod: Pod) -> None:
        async with changed:
            seen.append((kind, pod.metadata.name))
            changed.notify_all()

    async def saw(item: tuple[str, str]) -> None:
        async with changed:
            await asyncio.wait_for(changed.wait_for(lambda: item in seen), 10)

    pods = Informer(
        "pods", list_pods, Pod, on_list=on_list, on_change=on_change, resync_seconds=60, retry_delay=0.05,
        metrics=INFORMER_METRICS,
    )  # fmt: skip
    task = asyncio.create_task(pods.run())
    second: KubeApiServer | None = None
    try:
        await asyncio.wait_for(pods.listed.wait(), 5)
        store.create("pods", api_pod("before"), namespace="default")
        await saw(("ADDED", "before"))
        await first.stop()  # the watch ends and reconnecting is refused
        await asyncio.wait_for(refused.wait(), 5)
        store.create("pods", api_pod("during"), namespace="default")
        second = KubeApiServer(port=port, store=store)
        await second.start()
        await saw(("ADDED", "during"))
        assert pods.lists == 1  # resumed from its last version: nothing missed, no relist
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        if second is not None:
            await second.stop()


async def test_a_list_the_server_never_answers_is_given_up_and_tried_again() -> None:
    store = ObjectStore()
    store.create("pods", api_pod("waiting"), namespace="default")
    # Every list to `silent` hangs (answered after 300 s); `answering` serves the same objects.
    silent = KubeApiServer(store=store, faults=FaultPlan(rate=1.0, kinds=("timeout",), verbs=("list",)))
    answering = KubeApiServer(store=store)
    apis = [client_for(await silent.start()), client_for(await answering.start())]
    tries: list[int] = []

    async def list_pods(**kw: Any) -> Any:
        tries.append(len(tries))
        core: CoreApi = client.CoreV1Api(apis[0] if len(tries) == 1 else apis[1])
        return await core.list_pod_for_all_namespaces(**kw)

    listed: list[str] = []

    async def on_list(pods: list[Pod], resync: bool) -> None:
        listed.extend(p.metadata.name for p in pods)

    async def on_change(kind: str, pod: Pod) -> None:
        return None

    pods = Informer(
        "pods", list_pods, Pod, on_list=on_list, on_change=on_change, resync_seconds=60, retry_delay=0.05,
        list_timeout=0.5, metrics=INFORMER_METRICS,
    )  # fmt: skip
    task = asyncio.create_task(pods.run())
    try:
        await asyncio.wait_for(pods.listed.wait(), 10)
        assert listed == ["waiting"] and len(tries) >= 2  # the first list was given up
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for api in apis:
            await api.close()
        await silent.stop()
        await answering.stop()


# --- every scheduler's pods, gangs, Kueue topologies, batched publishing ----------------------


async def test_bound_pods_of_every_scheduler_are_reported_with_their_requests(
    kube_client: client.ApiClient, publisher: RecordingPublisher, running: ClusterWatcher
) -> None:
    core: CoreApi = client.CoreV1Api(kube_client)
    body = api_pod(
        "web", scheduler="default-scheduler", containers=[container("a", requests={"cpu": "2", "memory": "1Gi"})]
    )
    await core.create_namespaced_pod("default", body)
    # another scheduler binds it
    await core.create_namespaced_pod_binding(
        "web", "default", {"metadata": {"name": "web"}, "target": {"kind": "Node", "name": "cpu-1"}}
    )
    bound = (await publisher.wait_for(lifecycle("web", LifecyclePhase.BOUND)))[0].event
    assert isinstance(bound, PodLifecycleEvent)
    assert (bound.node, bound.ours, bound.requests) == ("cpu-1", False, {"cpu": "2", "memory": "1Gi"})
    await core.delete_namespaced_pod("web", "default")
    await publisher.wait_for(lifecycle("web", LifecyclePhase.DELETED))
    assert publisher.matching(pending("web")) == []


@pytest.fixture
async def crd_server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KubeApiServer]:
    async with server_with(monkeypatch, PODGROUPS, TOPOLOGIES) as server:
        yield server


def gang_sent(name: str) -> Callable[[Sent], bool]:
    return lambda s: s.topic == topics.GANGS_PENDING.name and s.key == name


async def test_a_volcano_gang_from_its_podgroup_and_its_pods(
    crd_server: KubeApiServer, publisher: RecordingPublisher
) -> None:
    api = client_for(crd_server.url)
    watcher = ClusterWatcher(api, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = await start(watcher)
    try:
        core: CoreApi = client.CoreV1Api(api)
        notes = {gangs.VOLCANO_GROUP_ANNOTATION: "train"}
        for name in ("w-0", "w-1"):
            await core.create_namespaced_pod("ml", api_pod(name, namespace="ml", annotations=notes))
        # the members are known, the PodGroup is not: nothing yet (pods are on one watch, so w-1 was handled)
        done = await core.create_namespaced_pod("ml", api_pod("marker", namespace="ml"))
        await publisher.wait_for(pending("marker"))
        assert publisher.matching(gang_sent("ml/train")) == []
        custom: CustomApi = client.CustomObjectsApi(api)
        network = {"mode": "hard", "highestTierAllowed": 1}
        await custom.create_namespaced_custom_object(
            PODGROUPS.group,
            PODGROUPS.version,
            "ml",
            "podgroups",
            podgroup_json("train", namespace="ml", network=network),
        )
        sent = (await publisher.wait_for(gang_sent("ml/train")))[0].event
        assert isinstance(sent, PendingGangEvent)
        assert [m.name for m in sent.members] == ["w-0", "w-1"] and sent.min_member == 2
        assert sent.network == NetworkConstraint(mode=TopologyMode.HARD, highest_tier=1)
        # bind one member: it is running, the gang goes out again with the other one pending
        w0 = await core.read_namespaced_pod("w-0", "ml")
        await core.create_namespaced_pod_binding(
            "w-0", "ml", {"metadata": {"name": "w-0", "uid": w0.metadata.uid}, "target": {"kind": "Node", "name": "g1"}}
        )
        again = (await publisher.wait_for(gang_sent("ml/train"), count=2))[1].event
        assert isinstance(again, PendingGangEvent)
        assert [m.name for m in again.members] == ["w-1"] and [r.node for r in again.running] == ["g1"]
        assert done.metadata.uid
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
    # members never went out one by one
    assert publisher.matching(lambda s: s.topic == topics.PODS_PENDING.name and "w-" in s.event.name) == []  # type: ignore[union-attr]


async def test_kueue_topologies_reach_topology_levels(crd_server: KubeApiServer, publisher: RecordingPublisher) -> None:
    api = client_for(crd_server.url)
    crd_server.store.create(TOPOLOGIES, topology_json("default", ["cloud/block", "cloud/rack"]))
    watcher = ClusterWatcher(api, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = await start(watcher)
    try:
        levels = lambda s: s.topic == topics.TOPOLOGY_LEVELS.name  # noqa: E731
        first = (await publisher.wait_for(levels))[0]
        assert first.key == "default" and isinstance(first.event, TopologyLevelsEvent)
        assert first.event.levels == ("cloud/block", "cloud/rack")
        crd_server.store.delete(TOPOLOGIES, "default")
        out = await publisher.wait_for(levels, count=3)
        assert isinstance(out[1].event, TopologyLevelsEvent) and out[1].event.deleted
        assert out[2] == Sent(topics.TOPOLOGY_LEVELS.name, "default", None)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


async def test_without_podgroups_and_topologies_the_watcher_is_ready(publisher: RecordingPublisher) -> None:
    from topoplace.dev.kubeapi import resources

    without = tuple(r for r in resources.ALL if r.group not in ("scheduling.volcano.sh", "kueue.x-k8s.io"))
    async with KubeApiServer(served=without, bookmark_interval=0.5) as server:
        api = client_for(server.url)
        watcher = ClusterWatcher(api, publisher, scheduler_name="topoplace", resync_seconds=60)
        task = await start(watcher)  # wait_ready returns: both CRDs answered 404
        try:
            assert watcher.ready() and not task.done()
            assert [w.lists for w in watcher.watches["topologies"]] == [0, 0] and watcher.watches["podgroups"][
                0
            ].lists == 0
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()


class ConcurrentPublisher(RecordingPublisher):
    """Counts the sends in flight at once; a send of a key in `slow` yields a few times before it lands."""

    def __init__(self, slow: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.slow = slow
        self.in_flight = 0
        self.most_in_flight = 0

    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        for _ in range(5 if key in self.slow and event is not None else 1):
            await asyncio.sleep(0)  # a round trip to the broker, as far as ordering goes
        self.in_flight -= 1
        await super().send(topic, key, event)


async def test_a_list_goes_out_together_keeping_each_keys_order(
    kube_api: KubeApiServer, kube_client: client.ApiClient
) -> None:
    for i in range(50):
        kube_api.store.create("pods", api_pod(f"p-{i}"), namespace="default")
    publisher = ConcurrentPublisher(slow=frozenset({"tor-a"}))
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60)
    task = await start(watcher)
    try:
        await publisher.wait_for(lambda s: s.topic == topics.PODS_PENDING.name, count=50)
        assert publisher.most_in_flight > 1  # not one round trip after the other
        # one key's events in order, other keys free to overtake them
        watcher.trackers.hypernodes.relisted([hypernode("tor-a", 1, [("Node", "n1")]), hypernode("tor-b", 1, [])], 1.0)
        publisher.sent.clear()
        await watcher.publish(watcher.trackers.hypernodes.relisted([hypernode("tor-b", 1, [("Node", "n2")])], 2.0))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    order = [(s.key, s.event is None) for s in publisher.sent]
    assert order == [("tor-b", False), ("tor-a", False), ("tor-a", True)]
