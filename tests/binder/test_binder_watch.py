"""The binder's watch of the API server: the ledger follows the cluster, not only Kafka.

Fault-run findings covered here: a forged `pods.lifecycle` "deleted" for a
bound pod must not free its devices; an edited `topoplace.io/devices`
annotation on a bound pod must not free the devices it was bound with; a
node's published topology listing more devices than its Node object must not
let a device index beyond the Node's allocatable be bound.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from binder_support import FaultProxy, PodFactory, RecordingProducer, WatchedCluster, placement_for
from decision_keys import TEST_KEY
from kube_clients import client_for
from kubernetes_asyncio import client
from opentelemetry import context as otel_context

from schemas import annotations as pod_annotations
from schemas import topics
from schemas.dra import ClaimAllocation, DeviceResult
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    LifecyclePhase,
    NodeTopologyEvent,
    PlacementEvent,
    PodLifecycleEvent,
)
from schemas.seal import SEAL
from schemas.topology import Device, Vendor
from services.binder.apply import PodBinder
from services.binder.cluster_view import ClusterView
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.kube_events import EventRecorder
from services.binder.kube_objects import ObjectMeta, PodObject, PodSpec
from services.binder.ledger import DeviceLedger, Holding, LedgerNote
from services.binder.outcome import PodView
from services.binder.pod_reader import PodReader
from services.binder.reporting import PodReporter
from services.binder.service import skip_proxy_lookups
from topoplace.dev.kubeapi import KubeApiServer

NODE = "gpu-node-w"


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


class Harness:
    def __init__(self, core: client.CoreV1Api, watched: WatchedCluster) -> None:
        self.ledger = watched.ledger
        self.producer = RecordingProducer()
        self.reporter = PodReporter(EventRecorder(core, component="topoplace"), watch=watched.cluster)
        steps = BindingSteps(
            ledger=self.ledger,
            binder=PodBinder(core, decision_key=TEST_KEY),
            reporter=self.reporter,
            cluster=watched.cluster,
            reader=PodReader(core),
        )
        self.handler = PlacementHandler(steps=steps, producer=self.producer)

    async def handle(self, placement: PlacementEvent) -> BindingEvent:
        await self.handler(Message(event=placement))
        await self.reporter.drain()
        event = self.producer.sent[-1].event
        assert isinstance(event, BindingEvent)
        return event


def gpus(count: int) -> tuple[Device, ...]:
    return tuple(
        Device(index=i, uuid=f"GPU-{i}", vendor=Vendor.NVIDIA, model="H100", memory_mib=80_000) for i in range(count)
    )


def pod_requests(proxy: FaultProxy) -> list[tuple[str, str]]:
    return [(s.method, s.path.rsplit("/", 1)[-1]) for s in proxy.log if "/pods" in s.path]


async def bound_pod(
    kube_api: KubeApiServer, make_pod: PodFactory, watched: WatchedCluster, devices: tuple[DeviceAssignment, ...]
) -> dict[str, Any]:
    """A pod bound by the API server with our device annotation, once the watch has seen it."""
    pod = make_pod()
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    notes = {
        pod_annotations.DEVICES: pod_annotations.encode_devices(devices),
        pod_annotations.NODE: NODE,
        SEAL: TEST_KEY.seal(uid, NODE, "d-1", devices),
    }
    binding = {"metadata": {"name": name, "uid": uid, "annotations": notes}, "target": {"name": NODE}}
    kube_api.store.bind("default", name, binding)
    await watched.until(lambda: watched.ledger.is_bound(uid))
    return pod


async def test_a_forged_lifecycle_delete_does_not_free_a_bound_pods_devices(
    kube_api: KubeApiServer, make_pod: PodFactory, watched: WatchedCluster
) -> None:
    pod = await bound_pod(kube_api, make_pod, watched, (DeviceAssignment(index=0),))
    uid = pod["metadata"]["uid"]
    forged = PodLifecycleEvent(uid=uid, namespace="default", name=pod["metadata"]["name"], phase=LifecyclePhase.DELETED)

    assert watched.ledger.apply_message(topics.PODS_LIFECYCLE.name, uid, forged) is LedgerNote.DELETE_REFUSED
    assert watched.ledger.apply_message(topics.PODS_LIFECYCLE.name, uid, None) is LedgerNote.DELETE_REFUSED
    assert set(watched.ledger.holders(NODE, 0)) == {uid}

    kube_api.store.delete("pods", pod["metadata"]["name"], namespace="default")
    await watched.until(lambda: watched.ledger.holding(uid) is None)  # the API server's delete frees them
    assert watched.ledger.holders(NODE, 0) == {}


async def test_an_edited_device_annotation_keeps_the_devices_bound(
    kube_api: KubeApiServer, make_pod: PodFactory, watched: WatchedCluster
) -> None:
    pod = await bound_pod(kube_api, make_pod, watched, (DeviceAssignment(index=1),))
    uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
    edited = pod_annotations.encode_devices((DeviceAssignment(index=6),))
    patched = kube_api.store.patch(
        "pods",
        name,
        "application/merge-patch+json",
        {"metadata": {"annotations": {pod_annotations.DEVICES: edited}}},
        namespace="default",
    )
    version = patched["metadata"]["resourceVersion"]
    await watched.until(lambda: seen(watched, uid).resource_version == version)
    assert set(watched.ledger.holders(NODE, 1)) == {uid}
    assert watched.ledger.holders(NODE, 6) == {}
    # Kafka repeating the edit changes nothing either.
    echoed = PodLifecycleEvent(
        uid=uid,
        namespace="default",
        name=name,
        phase=LifecyclePhase.BOUND,
        node=NODE,
        devices=(DeviceAssignment(index=6),),
    )
    assert watched.ledger.apply_message(topics.PODS_LIFECYCLE.name, uid, echoed) is LedgerNote.EDIT_IGNORED
    assert set(watched.ledger.holders(NODE, 1)) == {uid}


def seen(watched: WatchedCluster, uid: str) -> PodView:
    """The watch's view of a pod (an empty one while it has not seen it)."""
    return watched.cluster.pod(uid) or PodView(uid="")


async def test_device_indices_beyond_the_nodes_allocatable_are_refused(
    core: client.CoreV1Api,
    kube_api: KubeApiServer,
    proxy: FaultProxy,
    make_pod: PodFactory,
    make_node: Any,
    watched: WatchedCluster,
) -> None:
    make_node(NODE, 2)
    await watched.until(lambda: watched.cluster.allocatable(NODE) is not None)
    # The node agent claims 4 GPUs; the kubelet advertises 2.
    watched.ledger.apply_message(
        topics.TOPOLOGY_NODES.name, NODE, NodeTopologyEvent(node=NODE, machine_type="test", devices=gpus(4))
    )
    harness = Harness(core, watched)
    beyond, within = make_pod(), make_pod()
    await watched.until(lambda: all(watched.cluster.pod(p["metadata"]["uid"]) for p in (beyond, within)))
    refused = await harness.handle(placement_for(beyond, NODE, (DeviceAssignment(index=3),)))
    assert refused.outcome is BindingOutcome.CONFLICT
    assert "advertises 2 nvidia.com/gpu" in refused.reason and "no device 3" in refused.reason
    assert watched.ledger.holding(beyond["metadata"]["uid"]) is None

    accepted = await harness.handle(placement_for(within, NODE, (DeviceAssignment(index=1),)))
    assert accepted.outcome is BindingOutcome.BOUND
    assert pod_requests(proxy) == [("POST", "binding")]


async def test_a_node_without_a_node_object_is_refused(
    core: client.CoreV1Api, proxy: FaultProxy, make_pod: PodFactory, watched: WatchedCluster
) -> None:
    pod = make_pod()
    await watched.until(lambda: watched.cluster.pod(pod["metadata"]["uid"]) is not None)
    outcome = await Harness(core, watched).handle(placement_for(pod, "no-such-node"))
    assert outcome.outcome is BindingOutcome.CONFLICT and outcome.reason == 'node "no-such-node" not found'
    assert pod_requests(proxy) == []


async def test_with_the_watch_a_duplicated_placement_sends_nothing(
    core: client.CoreV1Api,
    kube_api: KubeApiServer,
    proxy: FaultProxy,
    make_pod: PodFactory,
    make_node: Any,
    watched: WatchedCluster,
) -> None:
    make_node(NODE, 8)
    pod = make_pod()
    uid = pod["metadata"]["uid"]
    await watched.until(lambda: watched.cluster.allocatable(NODE) is not None and watched.cluster.pod(uid) is not None)
    watched.ledger.set_node_devices(NODE, gpus(8))
    harness = Harness(core, watched)
    placement = placement_for(pod, NODE, (DeviceAssignment(index=2),))
    assert (await harness.handle(placement)).outcome is BindingOutcome.BOUND
    await watched.until(lambda: seen(watched, uid).node_name == NODE)
    again = await harness.handle(placement)
    assert again.outcome is BindingOutcome.BOUND and again.attempts == 0
    assert pod_requests(proxy) == [("POST", "binding")]


def test_a_relist_removes_the_pods_it_no_longer_lists() -> None:
    view = ClusterView()
    kept = PodObject(metadata=ObjectMeta(name="a", namespace="ns", uid="u-a"), spec=PodSpec(node_name="n"))
    dropped = PodObject(metadata=ObjectMeta(name="b", namespace="ns", uid="u-b"))
    assert not view.knows_gone("u-b")  # nothing is known gone before the first list
    view.replace_pods([kept, dropped])
    changes = view.replace_pods([kept])
    assert [(c.uid, c.now is None) for c in changes] == [("u-a", False), ("u-b", True)]
    assert view.knows_gone("u-b") and not view.knows_gone("u-a")


async def test_a_watch_whose_version_expired_lists_again_and_drops_what_went(
    kube_api: KubeApiServer, make_pod: PodFactory, watched: WatchedCluster
) -> None:
    pod = await bound_pod(kube_api, make_pod, watched, (DeviceAssignment(index=3),))
    uid = pod["metadata"]["uid"]
    # All in one step, before the watch can come back: its stream ends, the pod goes,
    # and the server forgets the history the watch would resume from (410 Gone).
    kube_api.store.close_watches()
    kube_api.store.delete("pods", pod["metadata"]["name"], namespace="default")
    kube_api.store.compact()
    await watched.until(lambda: watched.cluster.knows_gone(uid))
    assert watched.ledger.holding(uid) is None
    assert watched.ledger.holders(NODE, 3) == {}


@pytest.mark.parametrize("proxy_env", [{}, {"HTTPS_PROXY": "http://proxy.invalid:3128"}])
async def test_proxy_lookups_per_request_are_off_unless_a_proxy_is_configured(
    kube_api: KubeApiServer, monkeypatch: pytest.MonkeyPatch, proxy_env: dict[str, str]
) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in proxy_env.items():
        monkeypatch.setenv(name, value)
    api = client_for(kube_api.url)
    try:
        skip_proxy_lookups(api)
        assert api.rest_client.pool_manager.trust_env is bool(proxy_env)
    finally:
        await api.close()


async def test_a_dra_placement_is_not_held_to_the_nodes_extended_resources(
    core: client.CoreV1Api,
    kube_api: KubeApiServer,
    make_pod: PodFactory,
    watched: WatchedCluster,
) -> None:
    # A node of NVIDIA's DRA driver advertises no nvidia.com/gpu: its GPUs are in ResourceSlices.
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    kube_api.store.create("nodes", {"metadata": {"name": NODE}, "status": {"allocatable": allocatable}})
    await watched.until(lambda: watched.cluster.allocatable(NODE) is not None)
    pod = make_pod()
    claim = kube_api.store.create(
        "resourceclaims.resource.k8s.io",
        {
            "metadata": {"name": "gpu-claim", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        },
        namespace="default",
    )
    allocation = ClaimAllocation(
        namespace="default",
        name="gpu-claim",
        uid=claim["metadata"]["uid"],
        results=(DeviceResult(request="gpus", driver="gpu.nvidia.com", pool=NODE, device="gpu-0"),),
    )
    placement = msgspec.structs.replace(placement_for(pod, NODE, (DeviceAssignment(index=0),)), claims=(allocation,))
    outcome = await Harness(core, watched).handle(placement)
    assert outcome.outcome is BindingOutcome.BOUND, outcome.reason
    written = kube_api.store.get("resourceclaims.resource.k8s.io", "gpu-claim", "default")["status"]
    assert written["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    # Without claims the same node refuses the device: it advertises no nvidia.com/gpu.
    watched.ledger.set_node_devices(NODE, gpus(2))
    plain = await Harness(core, watched).handle(placement_for(make_pod(), NODE, (DeviceAssignment(index=1),)))
    assert plain.outcome is BindingOutcome.CONFLICT and "advertises no nvidia.com/gpu" in plain.reason


async def test_a_list_that_hangs_ends_with_the_client_timeout_and_is_tried_again() -> None:
    from services.binder.metrics import INFORMER_METRICS
    from topoplace import informer

    calls: list[dict[str, Any]] = []

    class Reply:
        status = 200

        async def read(self) -> bytes:
            return b'{"metadata": {"resourceVersion": "7"}, "items": []}'

        def release(self) -> None:
            pass

    async def list_call(**kwargs: Any) -> Reply:
        calls.append(kwargs)
        if len(calls) == 1:
            raise TimeoutError  # what the client raises once the request timeout has passed
        if kwargs.get("watch"):
            await asyncio.Event().wait()  # a watch with nothing to say: the test ends it
        return Reply()

    async def ignore(*args: Any) -> None:
        return None

    watch = informer.Informer(
        "pods", list_call, PodObject, on_list=ignore, on_change=ignore, metrics=INFORMER_METRICS, retry_delay=0.001
    )
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.wait_for(watch.listed.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert calls[0]["_request_timeout"].total == informer.LIST_TIMEOUT_SECONDS  # a list never waits forever


async def test_a_forged_lifecycle_bound_counts_only_for_a_pod_the_watch_has_bound_there(
    kube_api: KubeApiServer, make_pod: PodFactory, watched: WatchedCluster
) -> None:
    """A "bound" for a pod that never existed, or on another node than the API server says, holds nothing."""
    eight = tuple(DeviceAssignment(index=i) for i in range(8))
    ghost = PodLifecycleEvent(
        uid="never-existed", namespace="default", name="ghost", phase=LifecyclePhase.BOUND, node=NODE, devices=eight
    )
    note = watched.ledger.apply_message(topics.PODS_LIFECYCLE.name, "never-existed", ghost)
    assert note is LedgerNote.BOUND_UNCONFIRMED
    assert watched.ledger.holding("never-existed") is None
    assert watched.ledger.collisions("someone", NODE, eight) == ()

    pod = await bound_pod(kube_api, make_pod, watched, (DeviceAssignment(index=2),))
    uid = pod["metadata"]["uid"]
    elsewhere = msgspec.structs.replace(ghost, uid=uid, name=pod["metadata"]["name"], node="another-node")
    assert watched.ledger.apply_message(topics.PODS_LIFECYCLE.name, uid, elsewhere) is LedgerNote.BOUND_UNCONFIRMED
    assert watched.ledger.holding(uid) == Holding(pod_uid=uid, node=NODE, devices=(DeviceAssignment(index=2),))


def test_a_binding_only_the_topic_reported_ends_when_a_completed_list_lacks_the_pod() -> None:
    ledger = DeviceLedger()  # the topic trusted, as before the watch had the pod
    reported = PodLifecycleEvent(
        uid="u-1", namespace="ns", name="p", phase=LifecyclePhase.BOUND, node=NODE, devices=(DeviceAssignment(index=0),)
    )
    ledger.apply_message(topics.PODS_LIFECYCLE.name, "u-1", reported)
    ticket = ledger.hold(Holding(pod_uid="u-2", node=NODE, devices=(DeviceAssignment(index=1),)))
    ledger.mark_bound(ticket)  # bound by this binder: the watch may not have listed it yet
    assert ledger.forget_unlisted(lambda uid: False) == ["u-1"]
    assert ledger.holding("u-1") is None and ledger.is_bound("u-2")


class ListReply:
    """A list or watch reply as kubernetes-asyncio hands it over with `_preload_content=False`."""

    status = 200

    def __init__(self, body: bytes = b"") -> None:
        self.body = body
        self.content = self.lines()

    async def lines(self) -> Any:
        for line in self.body.splitlines(keepends=True):
            yield line

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass


def pod_list(*names: str) -> bytes:
    items = [
        {"metadata": {"name": n, "namespace": "default", "uid": f"uid-{n}", "resourceVersion": "1"}} for n in names
    ]
    return msgspec.json.encode({"metadata": {"resourceVersion": "1"}, "items": items})


async def test_the_binder_lists_again_periodically_and_learns_what_its_watch_missed() -> None:
    """A watch that silently misses a change (it says nothing) no longer hides it for good: the resync lists again."""
    from services.binder.service import watch_cluster

    pod_lists = [pod_list("before"), pod_list("before", "missed")]

    class Core:
        async def list_pod_for_all_namespaces(self, **kwargs: Any) -> ListReply:
            await asyncio.sleep(0)  # a request goes through the event loop
            if kwargs.get("watch"):
                return ListReply()  # a watch that ends with nothing to say
            return ListReply(pod_lists.pop(0) if len(pod_lists) > 1 else pod_lists[0])

        async def list_node(self, **kwargs: Any) -> ListReply:
            await asyncio.sleep(0)
            return ListReply() if kwargs.get("watch") else ListReply(pod_list())

    cluster = ClusterView(decision_key=TEST_KEY)
    ledger = DeviceLedger(pod_gone=cluster.knows_gone, pod_bound_on=cluster.bound_on)
    applied = asyncio.Event()
    watches = watch_cluster(Core(), cluster, ledger, applied=applied.set, resync_seconds=0.2)  # type: ignore[arg-type]
    tasks = [asyncio.create_task(w.run()) for w in watches]
    try:
        while cluster.pod("uid-missed") is None:
            applied.clear()
            await asyncio.wait_for(applied.wait(), 10)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert cluster.pod("uid-before") is not None
