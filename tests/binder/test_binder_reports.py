"""Issue 15, finding 5: what the binder writes to a pod (Events, PodScheduled=False) is decided by
its own API watch, aimed at one pod by uid, and bounded in size; through the real handler, the
binder's watches and the test API server."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from binder_support import PodFactory, RecordingProducer, WatchedCluster, placement_for
from hypothesis import given
from hypothesis import strategies as st
from kubernetes_asyncio import client
from opentelemetry import context as otel_context

from schemas.events import PlacementEvent, PlacementOutcome
from services.binder.apply import PodBinder
from services.binder.conditions import ConditionWriter
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.kube_events import MESSAGE_LIMIT_BYTES, EventRecorder, truncate_message
from services.binder.reporting import PodReporter
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer

POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=3, deadline_seconds=5.0)
HUGE_REASON = "0/16 nodes are available: " + "é node(s) had untolerated taint {gpu: x}. " * 500  # ~20 KB


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


async def no_sleep(seconds: float) -> None:
    return None


class Harness:
    """The service's wiring of one placement: handler, watch-guarded reporter, event and condition writers."""

    def __init__(self, core: client.CoreV1Api, watched: WatchedCluster) -> None:
        self.events = EventRecorder(core, component="topoplace")
        self.reporter = PodReporter(
            self.events, ConditionWriter(core, policy=POLICY, sleep=no_sleep), watch=watched.cluster
        )
        steps = BindingSteps(
            ledger=watched.ledger, binder=PodBinder(core), reporter=self.reporter, cluster=watched.cluster
        )
        self.handler = PlacementHandler(steps=steps, producer=RecordingProducer())

    async def handle(self, placement: PlacementEvent) -> None:
        await self.handler(Message(event=placement))
        await self.reporter.drain()
        await self.events.close()


def unschedulable(pod: dict[str, Any], reason: str = "0/16 nodes are available") -> PlacementEvent:
    return placement_for(pod, "", (), outcome=PlacementOutcome.UNSCHEDULABLE, reason=reason)


def events_naming(kube_api: KubeApiServer, namespace: str, name: str) -> list[dict[str, Any]]:
    items, _ = kube_api.store.list("events", namespace)
    return [e for e in items if e["involvedObject"]["name"] == name]


def pod_scheduled_condition(kube_api: KubeApiServer, pod: dict[str, Any]) -> dict[str, Any] | None:
    stored = kube_api.store.get("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
    conditions = (stored.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)


def other_schedulers_running_pod(kube_api: KubeApiServer, name: str) -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": "cpu-1",
            "containers": [{"name": "c", "image": "i"}],
        },
    }
    return kube_api.store.create("pods", body, namespace="default")


async def test_an_unschedulable_decision_for_a_pod_re_created_under_its_name_writes_nothing(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory, watched: WatchedCluster
) -> None:
    old = make_pod("victim")
    decision = unschedulable(old)  # made for the old pod, delivered late (or forged)
    kube_api.store.delete("pods", "victim", namespace="default")
    new = make_pod("victim")
    await watched.until(lambda: watched.cluster.pod(new["metadata"]["uid"]) is not None)
    await Harness(core, watched).handle(decision)
    assert events_naming(kube_api, "default", "victim") == []
    assert pod_scheduled_condition(kube_api, new) is None


async def test_a_running_pod_of_another_scheduler_gets_no_event_and_no_condition(
    core: client.CoreV1Api, kube_api: KubeApiServer, watched: WatchedCluster
) -> None:
    pod = other_schedulers_running_pod(kube_api, "not-ours")
    await watched.until(lambda: watched.cluster.pod(pod["metadata"]["uid"]) is not None)
    harness = Harness(core, watched)
    await harness.handle(unschedulable(pod, "x" * 20_000))  # its real uid: still not ours to write to
    await harness.handle(placement_for(pod, "gpu-1"))  # refused (other scheduler): no FailedScheduling either
    assert events_naming(kube_api, "default", "not-ours") == []
    assert pod_scheduled_condition(kube_api, pod) is None


async def test_a_20_kb_reason_reaches_the_pod_cut_to_1024_bytes(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory, watched: WatchedCluster
) -> None:
    pod = make_pod("too-long")
    await watched.until(lambda: watched.cluster.pod(pod["metadata"]["uid"]) is not None)
    await Harness(core, watched).handle(unschedulable(pod, HUGE_REASON))
    (event,) = events_naming(kube_api, "default", "too-long")
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]  # aimed at this pod, not the name
    condition = pod_scheduled_condition(kube_api, pod)
    assert condition is not None
    for message in (event["message"], condition["message"]):
        assert len(message.encode()) <= MESSAGE_LIMIT_BYTES and message.endswith("...")
        assert HUGE_REASON.startswith(message.removesuffix(" ..."))


async def test_the_condition_is_refused_for_a_pod_re_created_after_the_check(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    old = make_pod("raced")
    decision = unschedulable(old)
    kube_api.store.delete("pods", "raced", namespace="default")
    new = make_pod("raced")  # between the watch's answer and the write
    writer = ConditionWriter(core, policy=POLICY, sleep=no_sleep)
    assert not await writer.unschedulable(decision, "no node fits the pod")
    assert pod_scheduled_condition(kube_api, new) is None
    assert await writer.unschedulable(unschedulable(new), "no node fits the pod")  # its own pod: written
    assert pod_scheduled_condition(kube_api, new) is not None


@given(st.text(max_size=1500), st.integers(min_value=8, max_value=1100))
def test_a_message_is_cut_as_kube_scheduler_cuts_it_and_stays_utf8(message: str, limit: int) -> None:
    cut = truncate_message(message, limit)
    if len(message.encode()) <= limit:
        assert cut == message
    else:
        assert len(cut.encode()) <= limit and cut.endswith(" ...")
        head = cut.removesuffix(" ...")
        assert message.startswith(head)
        assert len(head.encode()) > limit - len(" ...") - 4  # at most one character dropped at the cut


@pytest.mark.parametrize("message", ["", "short", "é" * 512, "x" * MESSAGE_LIMIT_BYTES])
def test_a_message_within_the_limit_is_left_alone(message: str) -> None:
    assert truncate_message(message) == message
