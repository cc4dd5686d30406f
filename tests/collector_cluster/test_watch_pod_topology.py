"""What InterPodAffinity and PodTopologySpread need reaches the topics: pending pods' pod affinity, spread
constraints and DefaultSelector; bound pods' labels, pod affinity and deletion; namespaces' labels."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from cluster_fakes import RecordingPublisher
from cluster_objects import pod, pod_json
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import NamespaceEvent, PendingPodEvent, PodLifecycleEvent
from schemas.kube import LabelSelector, LabelSelectorRequirement
from services.collector.cluster import pod_topology
from services.collector.cluster import translate as tr
from services.collector.cluster.kinds import Trackers
from services.collector.cluster.trackers import Outcome
from services.collector.cluster.watcher import ClusterWatcher
from services.collector.cluster.workloads import Namespace, Workload
from topoplace.dev.kubeapi import KubeApiServer

ONE_PER_NODE: dict[str, Any] = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}
ZONE_SPREAD: dict[str, Any] = {
    "maxSkew": 1,
    "topologyKey": "topology.kubernetes.io/zone",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}


def pendings(outcome: Outcome) -> list[PendingPodEvent]:
    return [p.event for p in outcome.publications if isinstance(p.event, PendingPodEvent)]


def test_a_pending_pod_carries_its_pod_affinity_spread_and_every_label() -> None:
    p = pod(
        "web-0",
        labels={"app": "web", "tier": "front"},
        spec_extra={"affinity": ONE_PER_NODE, "topologySpreadConstraints": [ZONE_SPREAD]},
    )
    event, problems = tr.pending_event(p, 1.0)
    assert problems == []
    assert event.labels == {"app": "web", "tier": "front"}
    assert event.affinities is not None and event.affinities.pod_anti_affinity is not None
    (term,) = event.affinities.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    assert (term.topology_key, term.label_selector) == (
        "kubernetes.io/hostname",
        LabelSelector(match_labels={"app": "web"}),
    )
    (spread,) = event.topology_spread_constraints
    assert (spread.max_skew, spread.topology_key, spread.when_unsatisfiable) == (
        1,
        "topology.kubernetes.io/zone",
        "DoNotSchedule",
    )
    assert event.affinity is None  # no node affinity


def test_a_spread_constraint_the_api_server_would_refuse_is_left_out_and_named() -> None:
    bad = {**ZONE_SPREAD, "maxSkew": 0}
    p = pod("web-0", spec_extra={"topologySpreadConstraints": [ZONE_SPREAD, bad]})
    event, problems = tr.pending_event(p, 1.0)
    assert len(event.topology_spread_constraints) == 1
    ((field, reason),) = [(pr.field, pr.reason) for pr in problems]
    assert field == "spec.topologySpreadConstraints[1]" and "maxSkew" in reason


def test_a_bound_pod_of_any_scheduler_carries_its_labels_pod_affinity_and_deletion() -> None:
    p = pod(
        "db-0",
        scheduler="default-scheduler",
        node="n1",
        phase="Running",
        labels={"app": "db"},
        spec_extra={"affinity": ONE_PER_NODE},
        deletionTimestamp="2026-03-01T10:00:00Z",
    )
    event, problems = tr.bound_event(p, 1.0, ours=False)
    assert problems == []
    assert (event.labels, event.terminating, event.ours) == ({"app": "db"}, True, False)
    assert event.affinities is not None and event.affinities.pod_anti_affinity is not None


def test_a_bound_pods_labels_over_their_bound_are_left_out_and_it_still_counts() -> None:
    labels = {f"l{i}": "v" * 60 for i in range(pod_topology.MAX_RUNNING_TOPOLOGY_BYTES // 60)}
    p = pod("big", node="n1", phase="Running", labels=labels)
    event, problems = tr.bound_event(p, 1.0, ours=False)
    assert (event.labels, event.affinities, event.requests) == ({}, None, {"nvidia.com/gpu": "1"})
    assert [pr.field for pr in problems] == ["metadata.labels"]


def workload(name: str, selector: Any, namespace: str = "default") -> Workload:
    """A Service, ReplicaSet... (the row says the kind; the object is read alike)."""
    body = {"metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector}}
    return msgspec.convert(body, Workload)


def test_the_default_selector_is_the_services_and_the_controllers_merged() -> None:
    trackers = Trackers("topoplace", None)
    trackers.services.observe(workload("web", {"app": "web"}), 1.0)
    trackers.services.observe(workload("other", {"app": "other"}), 1.0)
    rs_selector = {
        "matchLabels": {"app": "web", "hash": "h1"},
        "matchExpressions": [{"key": "x", "operator": "Exists"}],
    }
    trackers.replica_sets.observe(workload("web-h1", rs_selector), 1.0)
    owner = [{"kind": "ReplicaSet", "name": "web-h1", "uid": "rs", "controller": True}]
    p = pod("web-h1-a", labels={"app": "web", "hash": "h1"}, ownerReferences=owner)
    (event,) = pendings(trackers.pods.observe(p, 2.0))
    assert event.default_spread_selector == LabelSelector(
        match_labels={"app": "web", "hash": "h1"},
        match_expressions=(LabelSelectorRequirement(key="x", operator="Exists"),),
    )


def test_a_service_made_after_its_pending_pod_publishes_the_pod_again_with_it() -> None:
    trackers = Trackers("topoplace", None)
    p = pod("web-0", labels={"app": "web"})
    (first,) = pendings(trackers.pods.observe(p, 1.0))
    assert first.default_spread_selector is None
    (again,) = pendings(trackers.services.observe(workload("web", {"app": "web"}), 2.0))
    assert again.uid == first.uid and again.default_spread_selector == LabelSelector(match_labels={"app": "web"})
    # the same Service seen again changes nothing; another namespace's Service neither
    assert pendings(trackers.services.observe(workload("web", {"app": "web"}), 3.0)) == []
    assert pendings(trackers.services.observe(workload("web", {"app": "web"}, "ml"), 3.0)) == []
    (gone,) = pendings(trackers.services.gone("default/web", 4.0))
    assert gone.default_spread_selector is None


def test_namespaces_go_out_with_their_labels_and_their_deletion() -> None:
    trackers = Trackers("topoplace", None)
    ns = msgspec.convert({"metadata": {"name": "ml", "labels": {"team": "a"}}}, Namespace)
    (published,) = trackers.namespaces.observe(ns, 1.0).publications
    assert (published.topic, published.key) == (topics.NAMESPACES.name, "ml")
    assert published.event == NamespaceEvent(name="ml", labels={"team": "a"}, observed_at=1.0)
    deleted, tombstone = trackers.namespaces.gone("ml", 2.0).publications
    assert isinstance(deleted.event, NamespaceEvent) and deleted.event.deleted
    assert (tombstone.key, tombstone.event) == ("ml", None)


def test_a_lifecycle_event_says_when_a_pod_starts_terminating() -> None:
    trackers = Trackers("topoplace", None)
    running = pod("db-0", node="n1", phase="Running", labels={"app": "db"})
    trackers.pods.observe(running, 1.0)
    deleting = pod("db-0", node="n1", phase="Running", labels={"app": "db"}, deletionTimestamp="2026-03-01T10:00:00Z")
    (published,) = trackers.pods.observe(deleting, 2.0).publications
    assert isinstance(published.event, PodLifecycleEvent) and published.event.terminating


def test_a_pending_pod_relabelled_goes_out_again_and_an_annotation_alone_does_not() -> None:
    """Running pods' anti-affinity and the spread selectors read the newcomer's labels: a change counts."""
    trackers = Trackers("topoplace", None)
    assert len(pendings(trackers.pods.observe(pod("web-0", labels={"app": "web"}), 1.0))) == 1
    noted = pod("web-0", labels={"app": "web"}, annotations={"note": "x"})
    assert pendings(trackers.pods.observe(noted, 2.0)) == []
    (again,) = pendings(trackers.pods.observe(pod("web-0", labels={"app": "web", "tier": "front"}), 3.0))
    assert again.labels == {"app": "web", "tier": "front"}


async def test_the_watcher_streams_namespaces_and_a_services_selector_from_the_api(
    kube_api: KubeApiServer, kube_client: client.ApiClient, publisher: RecordingPublisher
) -> None:
    """Through the test API server: the rows list and watch Namespaces and Services (RBAC in deploy/)."""
    kube_api.store.create("namespaces", {"metadata": {"name": "ml", "labels": {"team": "a"}}})
    kube_api.store.create("pods", pod_json("web-0", namespace="ml", labels={"app": "web"}), namespace="ml")
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace")
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_ready(), 5)
        (namespace,) = await publisher.wait_for(lambda s: s.topic == topics.NAMESPACES.name and s.key == "ml")
        service = {"metadata": {"name": "web", "namespace": "ml"}, "spec": {"selector": {"app": "web"}}}
        kube_api.store.create("services", service, namespace="ml")
        selected = await publisher.wait_for(
            lambda s: isinstance(s.event, PendingPodEvent) and s.event.default_spread_selector is not None
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert namespace.event == NamespaceEvent(name="ml", labels={"team": "a"}, observed_at=namespace.event.observed_at)
    event = selected[0].event
    assert isinstance(event, PendingPodEvent)
    assert event.default_spread_selector == LabelSelector(match_labels={"app": "web"})
