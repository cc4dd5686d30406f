"""One pod the watcher cannot publish is that pod's problem: the rest go out, it is reported, nothing restarts.

The test API server, the embedded broker of each test's own, the real watcher and producer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from cluster_objects import pod_json
from decision_keys import TEST_KEY_SECRET
from kube_clients import client_for
from prometheus_client import REGISTRY

from schemas import topics
from schemas.events import PendingPodEvent
from services.collector.cluster.service import run_cluster_watcher
from services.collector.cluster.watcher import SERVICE, ClusterWatcher
from topoplace.config import Settings
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

pytestmark = pytest.mark.e2e

WAIT = 60.0  # seconds; generous for 400 pods on a loaded 2-core machine, never reached when things work
ORDINARY = 400


class PendingInbox:
    """Pending-pod events by uid, as a follower of pods.pending receives them."""

    def __init__(self) -> None:
        self.by_uid: dict[str, PendingPodEvent] = {}
        self._changed = asyncio.Condition()

    async def __call__(self, message: Received) -> None:
        async with self._changed:
            if isinstance(message.event, PendingPodEvent):
                self.by_uid[message.event.uid] = message.event
            self._changed.notify_all()

    async def wait_for_count(self, count: int) -> None:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.by_uid) >= count)

        await asyncio.wait_for(reached(), WAIT)


@pytest.fixture
async def inbox(fresh_broker: str) -> AsyncIterator[PendingInbox]:
    box = PendingInbox()
    follower = TopicFollower(fresh_broker, [topics.PODS_PENDING], service="test-reader")
    task = asyncio.create_task(follower.run(box))
    yield box
    await follower.stop()
    await asyncio.gather(task, return_exceptions=True)


def create_pod(api: KubeApiServer, name: str, **kw: Any) -> str:
    body = pod_json(name, **kw)
    body["metadata"] = {k: v for k, v in body["metadata"].items() if k not in ("uid", "resourceVersion")}
    created: dict[str, Any] = api.store.create("pods", body, namespace="default")
    return str(created["metadata"]["uid"])


def restarts() -> float:
    return REGISTRY.get_sample_value("topoplace_loop_restarts_total", {"service": SERVICE, "loop": "watch"}) or 0.0


async def test_a_pod_with_a_megabyte_of_labels_and_annotations_stalls_nothing(
    fresh_broker: str, inbox: PendingInbox
) -> None:
    """Before: the broker refused its 1.1 MB event, the watcher restarted every few seconds, ~211 of 400 went out.

    Every label goes (pod affinity and spread read any of them), so a pod whose labels alone are over
    the bound is the one reported; annotations nobody reads are left out, however many."""
    huge_labels = {f"team.example.com/l{i}": "v" * 60 for i in range(5_000)}  # ~0.4 MB
    huge_annotations = {f"notes.example.com/a{i}": "x" * 1_000 for i in range(700)}  # ~0.7 MB
    gpus = ",".join(f"GPU-{i:032x}" for i in range(2_000))  # ~74 KB in an annotation the placer reads
    before = restarts()
    async with KubeApiServer() as api:
        ordinary = [create_pod(api, f"ordinary-{i}") for i in range(ORDINARY)]
        stripped = create_pod(api, "stripped", labels={"app": "web"}, annotations=huge_annotations)
        big = create_pod(api, "big", annotations={**huge_annotations, "nvidia.com/use-gpuuuid": gpus})
        labelled = create_pod(api, "labelled", labels=huge_labels, annotations=huge_annotations)
        settings = Settings(
            kafka_bootstrap=fresh_broker, kube_api_url=api.url, health_port=0, decision_key=TEST_KEY_SECRET
        )
        stop = asyncio.Event()
        watcher = asyncio.create_task(run_cluster_watcher(settings, stop=stop, resync_seconds=300))
        try:
            await inbox.wait_for_count(ORDINARY + 3)
        finally:
            stop.set()
            await asyncio.wait_for(watcher, 15)
    assert set(inbox.by_uid) == {*ordinary, stripped, big, labelled}
    assert not any(inbox.by_uid[uid].unpublishable for uid in ordinary)
    # the tenant's own annotations are not the placer's business: left out; its labels are
    assert (inbox.by_uid[stripped].labels, inbox.by_uid[stripped].annotations) == ({"app": "web"}, {})
    assert not inbox.by_uid[stripped].unpublishable
    # over the bound in what the placer reads: reported, for the placer to say so on the pod
    reported = inbox.by_uid[big]
    assert reported.unpublishable.startswith("the pod's scheduling event is ")
    assert "over topoplace's bound of 65,536" in reported.unpublishable
    assert (reported.name, reported.annotations, reported.requests) == ("big", {}, {})
    assert "shorten its labels" in inbox.by_uid[labelled].unpublishable
    assert inbox.by_uid[labelled].labels == {}
    assert restarts() == before


class SmallRequests(EventProducer):
    """The real producer with the broker's request limit made small: the client refuses bigger sends."""

    def client(self) -> AIOKafkaProducer:
        producer = super().client()
        producer._max_request_size = 4_096  # as a broker with message.max.bytes this low would refuse them
        return producer


async def test_a_send_the_broker_refuses_for_good_is_that_pods_problem(fresh_broker: str, inbox: PendingInbox) -> None:
    """A non-retriable produce error (MessageSizeTooLargeError here) reports the pod and the list goes on."""
    refused = REGISTRY.get_sample_value(
        "topoplace_cluster_watcher_unpublishable_total",
        {"topic": topics.PODS_PENDING.name, "error": "MessageSizeTooLargeError"},
    )
    uuids = ",".join(f"GPU-{i:032x}" for i in range(200))  # ~7 KB: under the event bound, over the request limit
    async with KubeApiServer() as api, SmallRequests(fresh_broker, service="test-small-requests") as producer:
        ordinary = [create_pod(api, f"small-{i}") for i in range(20)]
        big = create_pod(api, "refused", annotations={"nvidia.com/use-gpuuuid": uuids})
        kube = client_for(api.url)
        try:
            watcher = ClusterWatcher(kube, producer, scheduler_name="topoplace")
            task = asyncio.create_task(watcher.watches["pods"][0].run())
            try:
                await inbox.wait_for_count(21)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        finally:
            await kube.close()
    assert set(inbox.by_uid) == {*ordinary, big}
    reason = inbox.by_uid[big].unpublishable
    assert reason.startswith("the pod's scheduling event could not be published: MessageSizeTooLargeError")
    after = REGISTRY.get_sample_value(
        "topoplace_cluster_watcher_unpublishable_total",
        {"topic": topics.PODS_PENDING.name, "error": "MessageSizeTooLargeError"},
    )
    assert after == (refused or 0.0) + 1
