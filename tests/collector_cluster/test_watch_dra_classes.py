"""DeviceClasses and DeviceTaintRules -> resources.classes and resources.taintrules, through the test
API server: each published whole by name, a deleted one as a deleted event then a tombstone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from cluster_fakes import RecordingPublisher, Sent
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import DeviceClassEvent, DeviceTaintRuleEvent
from services.collector.cluster.watcher import ClusterWatcher
from topoplace.dev.kubeapi import KubeApiServer, resources

DRIVER = "gpu.example.com"


@pytest.fixture
async def running(kube_client: client.ApiClient, publisher: RecordingPublisher) -> AsyncIterator[ClusterWatcher]:
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.wait_ready(), 5)
    yield watcher
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def sent_on(topic: str, name: str, *, deleted: bool = False) -> Callable[[Sent], bool]:
    return lambda s: (
        s.topic == topic and s.event is not None and getattr(s.event, "name", "") == name and s.event.deleted is deleted
    )


def rule(name: str, device: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": device},
            "taint": {"key": "example.com/xid", "value": "79", "effect": "NoSchedule"},
        },
    }


async def test_a_taint_rule_is_published_whole_and_its_deletion_tombstoned(
    kube_api: KubeApiServer, running: ClusterWatcher, publisher: RecordingPublisher
) -> None:
    kube_api.store.create(resources.DEVICETAINTRULES, rule("broken-gpu", "gpu-3"))
    (sent,) = await publisher.wait_for(sent_on(topics.RESOURCE_TAINT_RULES.name, "broken-gpu"))
    assert sent.key == "broken-gpu" and isinstance(sent.event, DeviceTaintRuleEvent)
    assert sent.event.spec is not None and sent.event.spec.device_selector is not None
    assert sent.event.spec.device_selector.device == "gpu-3"
    assert (sent.event.spec.taint.key, sent.event.spec.taint.effect) == ("example.com/xid", "NoSchedule")

    kube_api.store.delete(resources.DEVICETAINTRULES, "broken-gpu")
    await publisher.wait_for(sent_on(topics.RESOURCE_TAINT_RULES.name, "broken-gpu", deleted=True))
    assert any(s.key == "broken-gpu" and s.event is None for s in publisher.sent)


async def test_a_device_class_is_published_with_its_selectors_and_config(
    kube_api: KubeApiServer, running: ClusterWatcher, publisher: RecordingPublisher
) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpus"},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"sharing": "timeslicing"}}}],
        },
    }
    kube_api.store.create(resources.DEVICECLASSES, body)
    (sent,) = await publisher.wait_for(sent_on(topics.RESOURCE_CLASSES.name, "gpus"))
    assert isinstance(sent.event, DeviceClassEvent)
    (config,) = sent.event.spec.config
    assert config.opaque is not None and config.opaque.parameters == {"sharing": "timeslicing"}
