"""The table of watched kinds drives the cluster watcher: its watches, readiness and seeding."""

from __future__ import annotations

import asyncio
from typing import Any

from cluster_fakes import RecordingPublisher
from cluster_objects import node_json
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import DisruptionBudgetEvent, HyperNodeEvent, NodeStatusEvent, PendingPodEvent, PodLifecycleEvent
from services.collector.cluster.kinds import SEEDED_TOPICS, WATCHED_KINDS
from services.collector.cluster.watched_kind import WatchedKind
from services.collector.cluster.watcher import PUBLISHED_TOPICS, ClusterWatcher
from topoplace.dev.kubeapi import KubeApiServer

NODES = next(k for k in WATCHED_KINDS if k.name == "nodes")


def node_status(name: str) -> Any:
    return lambda s: s.topic == topics.NODES_STATUS.name and s.key == name and isinstance(s.event, NodeStatusEvent)


async def test_every_row_is_watched_gated_and_seeded(
    kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace")
    names = [k.name for k in WATCHED_KINDS]
    assert list(watcher.readiness()) == names == list(watcher.watches)
    assert [w.resource for w in watcher.watches["topologies"]] == ["topologies.v1beta2", "topologies.v1beta1"]
    assert set(SEEDED_TOPICS) <= set(PUBLISHED_TOPICS)
    assert all((k.seed is None) == (k.seeded_from is None) for k in WATCHED_KINDS)


async def test_a_table_of_one_row_watches_that_kind_alone(
    kube_api: KubeApiServer, kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    """A watcher given only the nodes' row lists nodes, is ready on them, and publishes nothing else."""
    kube_api.store.create("nodes", node_json("n1"))
    kinds: tuple[WatchedKind[Any], ...] = (NODES,)
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", kinds=kinds)
    assert list(watcher.readiness()) == ["nodes"]
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_ready(), 5)
        await publisher.wait_for(node_status("n1"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert {s.topic for s in publisher.sent} == {topics.NODES_STATUS.name}


async def test_seeding_goes_to_the_row_of_the_topic(
    kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    """A node and a hypernode seeded from their topics, and gone from the cluster, are reported deleted."""
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace")
    gone_node = NodeStatusEvent(node="old-node")
    gone_tor = HyperNodeEvent(name="old-tor", tier=1, members=())
    watcher.seed({topics.NODES_STATUS.name: [gone_node], topics.TOPOLOGY_NETWORK.name: [gone_tor]})
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_ready(), 5)
        deleted_node = await publisher.wait_for(node_status("old-node"))
        deleted_tor = await publisher.wait_for(lambda s: s.key == "old-tor" and s.event is not None)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert any(isinstance(s.event, NodeStatusEvent) and s.event.deleted for s in deleted_node)
    assert any(isinstance(s.event, HyperNodeEvent) and s.event.deleted for s in deleted_tor)


async def test_budgets_and_pod_priority_are_published(
    kube_api: KubeApiServer, kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    """A PodDisruptionBudget goes to disruption.budgets; a pod's resolved priority, policy, start time and
    labels ride on its events (what preemption weighs)."""
    kube_api.store.create("nodes", node_json("n1"))
    kube_api.store.create(
        "priorityclasses.scheduling.k8s.io",
        {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"},
    )
    budget = {"metadata": {"name": "keep"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1}}
    created = kube_api.store.create("poddisruptionbudgets.policy", budget, namespace="team")
    kube_api.store.patch(
        "poddisruptionbudgets.policy",
        "keep",
        "application/merge-patch+json",
        {"status": {"disruptionsAllowed": 2}},
        namespace="team",
        status_only=True,
    )
    assert created["metadata"]["uid"]
    pending = {
        "metadata": {"name": "hi"},
        "spec": {
            "schedulerName": "topoplace",
            "priorityClassName": "high",
            "containers": [{"name": "c", "image": "i"}],
        },
    }
    running = {
        "metadata": {"name": "lo", "labels": {"app": "a"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    }
    kube_api.store.create("pods", pending, namespace="team")
    kube_api.store.create("pods", running, namespace="team")
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace")
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_ready(), 5)
        budgets = await publisher.wait_for(lambda s: s.topic == topics.DISRUPTION_BUDGETS.name)
        pods = await publisher.wait_for(lambda s: s.topic == topics.PODS_PENDING.name)
        bound = await publisher.wait_for(lambda s: s.topic == topics.PODS_LIFECYCLE.name)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    [sent] = [s for s in budgets if s.topic == topics.DISRUPTION_BUDGETS.name]
    assert isinstance(sent.event, DisruptionBudgetEvent) and sent.key == "team/keep"
    assert sent.event.disruptions_allowed == 2
    assert sent.event.selector is not None and sent.event.selector.match_labels == {"app": "a"}
    [hi] = [s.event for s in pods if isinstance(s.event, PendingPodEvent)]
    assert (hi.priority, hi.preemption_policy) == (1000, "Never")
    [lo] = [s.event for s in bound if isinstance(s.event, PodLifecycleEvent)]
    assert lo.labels == {"app": "a"} and lo.started_at > 0 and lo.priority == 0
