"""Scheduling Events: repeated ones are counted on one Event, failed writes retried in the background."""

from __future__ import annotations

import asyncio
from typing import Any

from binder_support import FaultProxy, PodFactory, placement_for
from kubernetes_asyncio import client

from schemas.events import PlacementOutcome
from services.binder.kube_events import EventRecorder
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer

REASON = "0/16 nodes fit: 16 have too few free GPUs"
FAST = BackoffPolicy(base_seconds=0.001, cap_seconds=0.002, max_attempts=4, deadline_seconds=5.0)


def events_of(kube_api: KubeApiServer, pod: dict[str, Any]) -> list[dict[str, Any]]:
    items, _ = kube_api.store.list("events", pod["metadata"]["namespace"])
    return [e for e in items if e["involvedObject"]["uid"] == pod["metadata"]["uid"]]


def unschedulable(pod: dict[str, Any], reason: str = REASON) -> Any:
    return placement_for(pod, "", (), outcome=PlacementOutcome.UNSCHEDULABLE, reason=reason)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_repeated_event_counts_up_on_one_event(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    pod = make_pod()
    recorder = EventRecorder(core, component="topoplace")
    try:
        for _ in range(3):  # every relist reports the pod again
            assert await recorder.failed_scheduling(unschedulable(pod), REASON)
    finally:
        await recorder.close()
    (event,) = events_of(kube_api, pod)
    assert (event["reason"], event["message"], event["count"]) == ("FailedScheduling", REASON, 3)
    assert event["lastTimestamp"] >= event["firstTimestamp"]


async def test_another_message_or_an_expired_window_is_a_new_event(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    pod = make_pod()
    clock = Clock()
    recorder = EventRecorder(core, component="topoplace", window_seconds=600, clock=clock)
    try:
        await recorder.failed_scheduling(unschedulable(pod), REASON)
        await recorder.failed_scheduling(unschedulable(pod), "another reason")
        clock.now += 601
        await recorder.failed_scheduling(unschedulable(pod), REASON)
    finally:
        await recorder.close()
    assert sorted((e["message"], e["count"]) for e in events_of(kube_api, pod)) == [
        (REASON, 1), (REASON, 1), ("another reason", 1),
    ]  # fmt: skip


async def test_the_memory_of_recent_events_is_bounded(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(3)]
    recorder = EventRecorder(core, component="topoplace", cache_size=2)
    try:
        for pod in pods:
            await recorder.failed_scheduling(unschedulable(pod), REASON)
        assert recorder.remembered() == 2
        await recorder.failed_scheduling(unschedulable(pods[0]), REASON)  # forgotten: a new Event
    finally:
        await recorder.close()
    assert [e["count"] for e in events_of(kube_api, pods[0])] == [1, 1]


async def test_a_failed_write_is_retried_in_the_background(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    proxy.fail("POST", "/events", 500, times=2)
    recorder = EventRecorder(core, component="topoplace", retry=FAST)
    try:
        assert not await recorder.failed_scheduling(unschedulable(pod), REASON)  # the binding goes on
        await asyncio.wait_for(recorder.drain(), 10)
    finally:
        await recorder.close()
    (event,) = events_of(kube_api, pod)
    assert event["message"] == REASON
    assert len(proxy.calls("POST", "/events")) == 3


async def test_background_retries_give_up_and_are_bounded(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(3)]
    proxy.fail("POST", "/events", 500, times=100)
    recorder = EventRecorder(core, component="topoplace", retry=FAST, max_retrying=2)
    try:
        for pod in pods:
            await recorder.failed_scheduling(unschedulable(pod), REASON)
        assert recorder.retrying() == 2  # the third is dropped, not queued
        await asyncio.wait_for(recorder.drain(), 10)
    finally:
        await recorder.close()
    # 3 first tries, then FAST.max_attempts - 1 retries for each of the two that were kept
    assert len(proxy.calls("POST", "/events")) == 3 + 2 * (FAST.max_attempts - 1)
    assert all(events_of(kube_api, pod) == [] for pod in pods)
