"""VolumeBinding's PreBind in the binder: a pod's WaitForFirstConsumer claim gets its node
(`volume.kubernetes.io/selected-node`), a static volume is pre-bound to its claim, and the pod's Binding
is written only once every claim is Bound, as the binder's own watch shows it; a claim that does not
bind in time gets the pod kube-scheduler's PodScheduled=False and back to the placer, not a hang.

Before, a pod with a WaitForFirstConsumer claim was bound with its claim never provisioned."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from binder_support import RecordingProducer, WatchedCluster, placement_for
from kube_clients import client_for
from kubernetes_asyncio import client
from opentelemetry import context as otel_context

from schemas.events import BindingEvent, BindingOutcome
from services.binder.apply import PodBinder
from services.binder.conditions import ConditionWriter
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.kube_events import EventRecorder
from services.binder.reporting import PodReporter
from services.binder.service import volume_binder
from services.binder.volume_binding import SCHEDULER_ERROR, VolumeBinder
from services.binder.volume_watch import StorageWatch, watch_storage
from topoplace.dev.kubeapi import KubeApiServer, resources

ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


class Storage:
    """The binder's storage watch of the test server, and a way to wait until it saw something."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.watch = StorageWatch()
        self._tasks = [asyncio.create_task(w.run()) for w in watch_storage(core, self.watch)]

    async def sees(self, done: Callable[[], bool]) -> None:
        assert await self.watch.wait_until(done, 10)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def claim_and_class_seen(storage: Storage) -> Callable[[], bool]:
    return lambda: storage.watch.claim("default/data") is not None and "fast" in storage.watch.catalog().classes


def volume_bound_and_seen(storage: Storage) -> Callable[[], bool]:
    """The claim bound, and its volume seen by the watch too (the two watches are apart)."""

    def seen() -> bool:
        claim = storage.watch.claim("default/data")
        return claim is not None and claim.bound and storage.watch.volume(claim.spec.volume_name) is not None

    return seen


@pytest.fixture
async def storage(kube_client: client.ApiClient) -> AsyncIterator[Storage]:
    watching = Storage(client.CoreV1Api(kube_client))
    yield watching
    await watching.stop()


async def cluster(kube_api: KubeApiServer, watched: WatchedCluster, *, provisioner: str = "csi.example.com") -> None:
    for name, zone in (("n-z1", "z1"), ("n-z2", "z2")):
        allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}
        node = {"metadata": {"name": name, "labels": {ZONE: zone}}, "status": {"allocatable": allocatable}}
        kube_api.store.create(resources.NODES, node)
    sc = {"metadata": {"name": "fast"}, "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}
    kube_api.store.create(resources.STORAGECLASSES, sc)
    await watched.until(lambda: watched.cluster.node_rules("n-z2") is not None)


def claim(kube_api: KubeApiServer, name: str = "data") -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "storageClassName": "fast",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    return kube_api.store.create(resources.PERSISTENTVOLUMECLAIMS, body, namespace="default")


async def pod_with_claim(kube_api: KubeApiServer, watched: WatchedCluster, claim_name: str = "data") -> dict[str, Any]:
    body = {
        "metadata": {"name": f"pod-{uuid.uuid4().hex[:8]}", "namespace": "default"},
        "spec": {
            "schedulerName": "topoplace",
            "containers": [{"name": "main", "image": "busybox"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }
    pod = kube_api.store.create(resources.PODS, body, namespace="default")
    await watched.until(lambda: watched.cluster.placement_rules(pod["metadata"]["uid"]) is not None)
    return pod


def binder_for(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, storage: Storage, timeout: float = 30
) -> PodBinder:
    volumes = volume_binder(watched.cluster, core, storage.watch, timeout)
    return PodBinder(core, volumes=volumes)


async def test_a_wait_for_first_consumer_claim_is_provisioned_on_the_chosen_node_before_the_pod_is_bound(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, storage: Storage
) -> None:
    await cluster(kube_api, watched)
    claim(kube_api)
    pod = await pod_with_claim(kube_api, watched)
    await storage.sees(claim_and_class_seen(storage))

    result = await binder_for(kube_api, core, watched, storage).bind(placement_for(pod, "n-z2", devices=()))

    assert result.outcome is BindingOutcome.BOUND, result.reason
    bound = kube_api.store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "default")
    assert bound["metadata"]["annotations"][SELECTED_NODE] == "n-z2"
    assert bound["status"]["phase"] == "Bound"
    volume = kube_api.store.get(resources.PERSISTENTVOLUMES, bound["spec"]["volumeName"])
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": ZONE, "operator": "In", "values": ["z2"]}]
    assert kube_api.store.get(resources.PODS, pod["metadata"]["name"], "default")["spec"]["nodeName"] == "n-z2"


async def test_a_static_volume_the_node_reaches_is_pre_bound_to_the_claim(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, storage: Storage
) -> None:
    await cluster(kube_api, watched, provisioner="kubernetes.io/no-provisioner")
    for name, zone in (("local-z1", "z1"), ("local-z2", "z2")):
        affinity = {
            "required": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]
            }
        }
        spec = {
            "storageClassName": "fast",
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": affinity,
        }
        kube_api.store.create(resources.PERSISTENTVOLUMES, {"metadata": {"name": name}, "spec": spec})
    claim(kube_api)
    pod = await pod_with_claim(kube_api, watched)
    await storage.sees(
        lambda: (
            all(storage.watch.volume(v) is not None for v in ("local-z1", "local-z2"))
            and claim_and_class_seen(storage)()
        )
    )

    result = await binder_for(kube_api, core, watched, storage).bind(placement_for(pod, "n-z1", devices=()))

    assert result.outcome is BindingOutcome.BOUND, result.reason
    assert kube_api.store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "default")["spec"]["volumeName"] == "local-z1"
    ref = kube_api.store.get(resources.PERSISTENTVOLUMES, "local-z1")["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"]) == ("default", "data")
    assert "claimRef" not in kube_api.store.get(resources.PERSISTENTVOLUMES, "local-z2")["spec"]


async def test_a_claim_bound_to_another_zones_volume_is_not_bound_there_whatever_the_placement_says(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, storage: Storage
) -> None:
    await cluster(kube_api, watched)
    claim(kube_api)
    version = kube_api.store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "default")["metadata"]["resourceVersion"]
    kube_api.store.patch(
        resources.PERSISTENTVOLUMECLAIMS,
        "data",
        "application/merge-patch+json",
        {"metadata": {"annotations": {SELECTED_NODE: "n-z1"}, "resourceVersion": version}},
        namespace="default",
    )  # another pod's scheduler chose n-z1: the provisioner made its volume in z1
    pod = await pod_with_claim(kube_api, watched)
    await storage.sees(volume_bound_and_seen(storage))

    result = await binder_for(kube_api, core, watched, storage).bind(placement_for(pod, "n-z2", devices=()))

    assert result.outcome is BindingOutcome.CONFLICT
    assert "node(s) had volume node affinity conflict" in result.reason
    assert "nodeName" not in kube_api.store.get(resources.PODS, pod["metadata"]["name"], "default")["spec"]


@pytest.fixture
async def no_provisioner() -> AsyncIterator[tuple[KubeApiServer, client.CoreV1Api, WatchedCluster, Storage]]:
    """A cluster where nobody provisions volumes or binds claims (no CSI provisioner, no PV controller)."""
    async with KubeApiServer(bookmark_interval=0.5, volume_provisioner=False) as server:
        api = client_for(server.url)
        core = client.CoreV1Api(api)
        watched, storage = WatchedCluster(core), Storage(core)
        await watched.synced()
        try:
            yield server, core, watched, storage
        finally:
            await storage.stop()
            await watched.stop()
            await api.close()


async def test_a_claim_never_provisioned_gets_kubes_reason_after_the_bind_timeout_not_a_hang(
    no_provisioner: tuple[KubeApiServer, client.CoreV1Api, WatchedCluster, Storage],
) -> None:
    kube_api, core, watched, storage = no_provisioner
    await cluster(kube_api, watched)
    claim(kube_api)
    pod = await pod_with_claim(kube_api, watched)
    await storage.sees(claim_and_class_seen(storage))

    binder = binder_for(kube_api, core, watched, storage, timeout=0.5)
    result = await binder.bind(placement_for(pod, "n-z1", devices=()))

    assert result.outcome is BindingOutcome.FAILED  # the placer plans the pod again
    assert result.reason == 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    assert result.condition == SCHEDULER_ERROR
    stored = kube_api.store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "default")
    assert stored["metadata"]["annotations"][SELECTED_NODE] == "n-z1"
    assert "nodeName" not in kube_api.store.get(resources.PODS, pod["metadata"]["name"], "default")["spec"]


async def test_a_provisioner_that_gives_up_ends_the_wait_at_once(
    no_provisioner: tuple[KubeApiServer, client.CoreV1Api, WatchedCluster, Storage],
) -> None:
    kube_api, core, watched, storage = no_provisioner
    await cluster(kube_api, watched)
    claim(kube_api)
    pod = await pod_with_claim(kube_api, watched)
    await storage.sees(claim_and_class_seen(storage))

    binder = binder_for(kube_api, core, watched, storage, timeout=600)
    binding = asyncio.create_task(binder.bind(placement_for(pod, "n-z1", devices=())))
    await storage.sees(lambda: SELECTED_NODE in storage.watch.claim("default/data").metadata.annotations)
    # the external provisioner's final failure: it removes the annotation so that the pod is scheduled again
    current = kube_api.store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "default")
    current["metadata"]["annotations"].pop(SELECTED_NODE)
    kube_api.store.replace(resources.PERSISTENTVOLUMECLAIMS, "data", current, namespace="default")
    result = await asyncio.wait_for(binding, 10)

    assert result.outcome is BindingOutcome.FAILED and result.condition == SCHEDULER_ERROR
    assert result.reason.endswith("binding volumes: provisioning failed for PVC default/data")


async def test_a_pod_without_claims_is_bound_as_before(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, storage: Storage, make_pod: Any
) -> None:
    await cluster(kube_api, watched)
    pod = make_pod()
    await watched.until(lambda: watched.cluster.placement_rules(pod["metadata"]["uid"]) is not None)
    result = await binder_for(kube_api, core, watched, storage).bind(placement_for(pod, "n-z1", devices=()))
    assert result.outcome is BindingOutcome.BOUND


async def test_the_kube_client_talks_to_the_storage_api(kube_api: KubeApiServer) -> None:
    api = client_for(kube_api.url)
    try:
        listed = await client.StorageV1Api(api).list_storage_class()
        assert listed.items == []
    finally:
        await api.close()


async def test_through_the_handler_the_pod_gets_kubes_scheduler_error_condition_and_event(
    no_provisioner: tuple[KubeApiServer, client.CoreV1Api, WatchedCluster, Storage],
) -> None:
    kube_api, core, watched, storage = no_provisioner
    await cluster(kube_api, watched)
    claim(kube_api)
    pod = await pod_with_claim(kube_api, watched)
    await storage.sees(claim_and_class_seen(storage))
    events = EventRecorder(core, component="topoplace")
    reporter = PodReporter(events, ConditionWriter(core), watch=watched.cluster)
    binder = binder_for(kube_api, core, watched, storage, timeout=0.5)
    producer = RecordingProducer()
    steps = BindingSteps(ledger=watched.ledger, binder=binder, reporter=reporter, cluster=watched.cluster)

    await PlacementHandler(steps=steps, producer=producer)(Message(event=placement_for(pod, "n-z1", devices=())))
    await reporter.drain()
    await events.close()

    (sent,) = producer.sent
    assert isinstance(sent.event, BindingEvent) and sent.event.outcome is BindingOutcome.FAILED
    stored = kube_api.store.get(resources.PODS, pod["metadata"]["name"], "default")
    (condition,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    message = 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", SCHEDULER_ERROR, message)
    items, _ = kube_api.store.list("events", "default")
    assert [e["message"] for e in items if e["reason"] == "FailedScheduling"] == [message]


async def test_a_pod_the_watch_has_not_seen_yet_has_its_claims_read_from_the_server(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, storage: Storage, make_pod: Any
) -> None:
    await cluster(kube_api, watched)
    claim(kube_api)
    pod = await pod_with_claim(kube_api, watched)
    plain = make_pod()  # mounts nothing: bound as before, whatever the watch knows
    await storage.sees(claim_and_class_seen(storage))
    lagging = VolumeBinder(
        core,
        storage.watch,
        pod_claims=lambda uid: None,  # the binder's pod watch lags behind both pods
        node_labels=lambda node: {ZONE: "z1"},
    )
    binder = PodBinder(core, volumes=lagging)

    result = await binder.bind(placement_for(pod, "n-z1", devices=()))
    assert result.outcome is BindingOutcome.BOUND, result.reason
    assert kube_api.store.get(resources.PERSISTENTVOLUMECLAIMS, "data", "default")["status"]["phase"] == "Bound"
    assert (await binder.bind(placement_for(plain, "n-z1", devices=()))).outcome is BindingOutcome.BOUND
