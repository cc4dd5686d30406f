"""A gang's members' DRA claims go out whole on gangs.pending, as a single pod's do on pods.pending,
and a claim made from a ComputeDomain's channel template names the domain (resource.nvidia.com)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from cluster_fakes import RecordingPublisher, Sent
from cluster_objects import pod_json
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import PendingGangEvent
from services.collector.cluster.compute_domains import ComputeDomain, ComputeDomainsOfPods
from services.collector.cluster.dra import ResourceClaim, allocated_claim_tracker
from services.collector.cluster.objects import Pod, PodGroup
from services.collector.cluster.pod_feeds import ClaimsOfPods
from services.collector.cluster.trackers import PodTracker
from services.collector.cluster.watcher import ClusterWatcher
from topoplace.dev.kubeapi import KubeApiServer, resources

NAMESPACE = "ml"
DRIVER = "gpu.nvidia.com"


def claim_body(name: str) -> dict[str, Any]:
    exactly = {"deviceClassName": DRIVER, "count": 1}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
    }


def member(name: str, group: str, entries: list[dict[str, str]], made: dict[str, str] | None = None) -> dict[str, Any]:
    body = pod_json(
        name,
        namespace=NAMESPACE,
        annotations={"scheduling.k8s.io/group-name": group},
        containers=[{"name": "main", "image": "busybox"}],
        spec_extra={"resourceClaims": entries},
    )
    if made:
        body["status"]["resourceClaimStatuses"] = [{"name": e, "resourceClaimName": c} for e, c in made.items()]
    return body


def podgroup_body(name: str, min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": min_member},
    }


def domain_body(name: str, template: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": template}}},
    }


def gang_sent(predicate: Callable[[PendingGangEvent], bool]) -> Callable[[Sent], bool]:
    return lambda s: (
        s.topic == topics.GANGS_PENDING.name and isinstance(s.event, PendingGangEvent) and predicate(s.event)
    )


@pytest.fixture
async def running(kube_client: client.ApiClient, publisher: RecordingPublisher) -> AsyncIterator[ClusterWatcher]:
    watcher = ClusterWatcher(kube_client, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = asyncio.create_task(watcher.run())
    await asyncio.wait_for(watcher.wait_ready(), 5)
    yield watcher
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_gangs_members_claims_go_out_whole(
    kube_api: KubeApiServer, publisher: RecordingPublisher, running: ClusterWatcher
) -> None:
    store = kube_api.store
    for name in ("own-0", "own-1", "shared"):
        store.create(resources.RESOURCECLAIMS, claim_body(name), namespace=NAMESPACE)
    store.create(resources.PODGROUPS, podgroup_body("pair"), namespace=NAMESPACE)
    for i in range(2):
        entries = [{"name": "own", "resourceClaimName": f"own-{i}"}, {"name": "shared", "resourceClaimName": "shared"}]
        store.create(resources.PODS, member(f"pair-{i}", "pair", entries), namespace=NAMESPACE)

    (sent, *_) = await publisher.wait_for(gang_sent(lambda g: len(g.members) == 2))
    assert isinstance(sent.event, PendingGangEvent)
    uids = {
        n: store.get(resources.RESOURCECLAIMS, n, NAMESPACE)["metadata"]["uid"] for n in ("own-0", "own-1", "shared")
    }
    for i, pending in enumerate(sent.event.members):
        assert [c.claim_name for c in pending.claims] == [f"own-{i}", "shared"]
        assert all(c.spec is not None and c.waiting == "" for c in pending.claims)  # read whole
        assert [c.claim_uid for c in pending.claims] == [uids[f"own-{i}"], uids["shared"]]
        assert [r.count for c in pending.claims for r in c.requests] == [1, 1]


async def test_a_compute_domains_channel_claims_name_the_domain_once_it_is_seen(
    kube_api: KubeApiServer, publisher: RecordingPublisher, running: ClusterWatcher
) -> None:
    store = kube_api.store
    store.create(resources.PODGROUPS, podgroup_body("nvl"), namespace=NAMESPACE)
    for i in range(2):
        store.create(resources.RESOURCECLAIMS, claim_body(f"nvl-{i}-channel"), namespace=NAMESPACE)
        entries = [{"name": "channel", "resourceClaimTemplateName": "nvl-channel"}]
        body = member(f"nvl-{i}", "nvl", entries, made={"channel": f"nvl-{i}-channel"})
        created = store.create(resources.PODS, body, namespace=NAMESPACE)  # the status as the controller writes it
        store.replace(
            resources.PODS,
            body["metadata"]["name"],
            {**created, "status": body["status"]},
            namespace=NAMESPACE,
            status_only=True,
        )
    (before, *_) = await publisher.wait_for(gang_sent(lambda g: all(c.claim_name for m in g.members for c in m.claims)))
    assert isinstance(before.event, PendingGangEvent)
    assert [c.compute_domain for m in before.event.members for c in m.claims] == ["", ""]
    assert [c.template for m in before.event.members for c in m.claims] == ["nvl-channel", "nvl-channel"]

    # the domain seen later: the gang goes out again, its channel claims naming it
    store.create(resources.COMPUTEDOMAINS, domain_body("nvl", "nvl-channel"), namespace=NAMESPACE)
    (after, *_) = await publisher.wait_for(
        gang_sent(lambda g: all(c.compute_domain for m in g.members for c in m.claims) and len(g.members) == 2)
    )
    assert isinstance(after.event, PendingGangEvent)
    assert {c.compute_domain for m in after.event.members for c in m.claims} == {f"{NAMESPACE}/nvl"}
    assert all(c.spec is not None for m in after.event.members for c in m.claims)


# --- the trackers alone -------------------------------------------------------------------------------


def gang_events(publications: list[Any]) -> list[PendingGangEvent]:
    return [p.event for p in publications if isinstance(p.event, PendingGangEvent)]


def tracked_gang() -> PodTracker:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(msgspec.convert(podgroup_body("nvl"), PodGroup), 1.0)
    return tracker


def template_member(i: int, made: bool) -> Pod:
    entries = [{"name": "channel", "resourceClaimTemplateName": "nvl-channel"}]
    body = member(f"nvl-{i}", "nvl", entries, made={"channel": f"nvl-{i}-channel"} if made else None)
    body["metadata"]["uid"] = f"uid-{i}"
    return msgspec.convert(body, Pod)


def test_a_member_whose_template_claim_is_made_sends_its_gang_again() -> None:
    tracker = tracked_gang()
    tracker.observe(template_member(0, made=False), 2.0)
    (first,) = gang_events(tracker.observe(template_member(1, made=False), 3.0).publications)
    assert [c.claim_name for m in first.members for c in m.claims] == ["", ""]
    (again,) = gang_events(tracker.observe(template_member(0, made=True), 4.0).publications)
    assert [c.claim_name for m in again.members for c in m.claims] == ["nvl-0-channel", ""]


def test_a_claim_a_gang_member_names_appearing_sends_its_gang_again() -> None:
    tracker = tracked_gang()
    claims = ClaimsOfPods(allocated_claim_tracker(), tracker)
    tracker.observe(template_member(0, made=True), 2.0)
    (first,) = gang_events(tracker.observe(template_member(1, made=True), 3.0).publications)
    body = {**claim_body("nvl-1-channel"), "metadata": {"name": "nvl-1-channel", "namespace": NAMESPACE, "uid": "c"}}
    (again,) = gang_events(claims.observe(msgspec.convert(body, ResourceClaim), 4.0).publications)
    assert again.members == first.members  # the publisher reads its claims again as it goes out
    other = {**body, "metadata": {"name": "other", "namespace": NAMESPACE, "uid": "o"}}
    assert gang_events(claims.observe(msgspec.convert(other, ResourceClaim), 5.0).publications) == []


def test_a_compute_domain_changing_its_template_or_gone_sends_the_gang_without_it() -> None:
    tracker = tracked_gang()
    domains = ComputeDomainsOfPods(tracker)
    domain = msgspec.convert(domain_body("nvl", "nvl-channel"), ComputeDomain)
    assert domains.observe(domain, 1.5).publications == []  # no pod made from its template yet
    tracker.observe(template_member(0, made=True), 2.0)
    (first,) = gang_events(tracker.observe(template_member(1, made=True), 3.0).publications)
    assert {c.compute_domain for m in first.members for c in m.claims} == {f"{NAMESPACE}/nvl"}
    assert domains.observe(domain, 3.5).publications == []  # the same: nothing new
    (gone,) = gang_events(domains.gone(f"{NAMESPACE}/nvl", 4.0).publications)
    assert {c.compute_domain for m in gone.members for c in m.claims} == {""}
    (back,) = gang_events(domains.relisted([domain], 5.0).publications)
    assert {c.compute_domain for m in back.members for c in m.claims} == {f"{NAMESPACE}/nvl"}
    moved = msgspec.convert(domain_body("nvl", "other-channel"), ComputeDomain)
    (left,) = gang_events(domains.observe(moved, 6.0).publications)
    assert {c.compute_domain for m in left.members for c in m.claims} == {""}
