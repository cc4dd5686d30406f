"""A gang whose members claim DRA devices, end to end (real broker, test API server): the cluster watcher
sends the members' claims whole, the placer allocates them jointly with the gang's choice (a claim both
members name once), and the binder writes every allocation, reserved for the pods using it, before it
binds them. A ComputeDomain's gang (its members' claims made from the domain's channel template) is
kept inside one NVLink clique: with no clique holding it, it waits, told why."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from e2e_cluster import CLUSTER, NAMESPACE, pods_by_uid
from e2e_pipeline import Outcomes, Pipeline

from schemas.annotations import SCHEDULER_NAME
from schemas.events import BindingOutcome
from topoplace.dev.demo import dra
from topoplace.dev.demo.cluster import topology_of
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

H100 = [n for n in CLUSTER.nodes if n.fixture == "dgx-h100"]  # e2e-dgx-h100-0, -1 (ToR 0) and -2 (ToR 1)
CLIQUE_LABEL = "nvidia.com/gpu.clique"


def gpus(count: int) -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": dra.DRIVER, "count": count}}]}}


def template_body(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": gpus(count)},
    }


def claim_body(name: str, count: int) -> dict[str, Any]:
    meta = {"name": name, "namespace": NAMESPACE}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": gpus(count)}


def podgroup(store: ObjectStore, name: str) -> None:
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": 2},
    }
    store.create(kube_resources.PODGROUPS, body, namespace=NAMESPACE)


def member(store: ObjectStore, name: str, group: str, entries: list[dict[str, str]]) -> str:
    """A member pod with `entries` as its spec.resourceClaims; its uid."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "topoplace-e2e"},
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "resourceClaims": entries,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/e2e:latest",
                    "resources": {"claims": [{"name": e["name"]} for e in entries]},
                }
            ],
        },
    }
    return str(store.create(kube_resources.PODS, body, namespace=NAMESPACE)["metadata"]["uid"])


def gpu_slices(store: ObjectStore) -> None:
    store.create(kube_resources.DEVICECLASSES, dra.device_class())
    for node in H100:
        store.create(kube_resources.RESOURCESLICES, dra.resource_slice(node.name, topology_of(node).devices))


def claims_of(store: ObjectStore, pod: dict[str, Any]) -> dict[str, str]:
    """The pod's entries -> the ResourceClaim each names (a template's: as its status says)."""
    made = {s["name"]: s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses", [])}
    return {e["name"]: e.get("resourceClaimName") or made[e["name"]] for e in pod["spec"]["resourceClaims"]}


def allocation_of(store: ObjectStore, name: str) -> tuple[list[tuple[str, str]], list[str]]:
    """((pool, device) of each result, names of the pods it is reserved for)."""
    status = store.get(kube_resources.RESOURCECLAIMS, name, NAMESPACE).get("status") or {}
    devices = sorted((r["pool"], r["device"]) for r in status["allocation"]["devices"]["results"])
    return devices, sorted(r["name"] for r in status.get("reservedFor") or [])


async def test_a_gangs_own_and_shared_claims_are_allocated_and_reserved_and_no_device_twice(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    gpu_slices(store)
    own = f"{run_id}-two-gpus"
    store.create(kube_resources.RESOURCECLAIMTEMPLATES, template_body(own, 2), namespace=NAMESPACE)
    shared = f"{run_id}-shared"
    store.create(kube_resources.RESOURCECLAIMS, claim_body(shared, 1), namespace=NAMESPACE)
    group = f"{run_id}-pair"
    podgroup(store, group)
    await pipeline.start_all()

    entries = [{"name": "own", "resourceClaimTemplateName": own}, {"name": "shared", "resourceClaimName": shared}]
    uids = [member(store, f"{group}-{i}", group, entries) for i in range(2)]
    await pipeline.wait_bound(uids, timeout=60)

    pods = pods_by_uid(store)
    nodes = {pods[uid]["spec"]["nodeName"] for uid in uids}
    assert len(nodes) == 1 and nodes <= {n.name for n in H100}  # the shared claim's device reachable from both
    names = [claims_of(store, pods[uid]) for uid in uids]
    owned = [allocation_of(store, n["own"]) for n in names]
    assert [len(devices) for devices, _ in owned] == [2, 2]
    assert [users for _, users in owned] == [[f"{group}-0"], [f"{group}-1"]]
    held, users = allocation_of(store, shared)
    assert len(held) == 1 and users == [f"{group}-0", f"{group}-1"]  # allocated once, reserved for both
    taken = [d for devices, _ in owned for d in devices] + held
    assert {pool for pool, _ in taken} == nodes
    assert [d for d, n in Counter(taken).items() if n > 1] == []  # never one device twice


def compute_domain_gang(store: ObjectStore, run_id: str, cliques: dict[str, str]) -> tuple[str, str]:
    """Nodes labelled with their NVLink clique, a ComputeDomain whose channel's template asks a node's 8
    GPUs, and its gang's PodGroup: (the gang's name, the channel template's)."""
    gpu_slices(store)
    for node, clique in cliques.items():
        body = store.get(kube_resources.NODES, node)
        body["metadata"]["labels"] = {**body["metadata"].get("labels", {}), CLIQUE_LABEL: clique}
        store.replace(kube_resources.NODES, node, body)
    channel = f"{run_id}-imex-channel"
    store.create(kube_resources.RESOURCECLAIMTEMPLATES, template_body(channel, 8), namespace=NAMESPACE)
    domain = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": f"{run_id}-imex", "namespace": NAMESPACE},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": channel}}},
    }
    store.create(kube_resources.COMPUTEDOMAINS, domain, namespace=NAMESPACE)
    group = f"{run_id}-nvl"
    podgroup(store, group)
    return group, channel


async def test_a_compute_domains_gang_is_placed_inside_its_clique_with_its_channel_claims(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    group, channel = compute_domain_gang(store, run_id, {"e2e-dgx-h100-0": "e2e.a", "e2e-dgx-h100-1": "e2e.a"})
    await pipeline.start_all()

    uids = [
        member(store, f"{group}-{i}", group, [{"name": "channel", "resourceClaimTemplateName": channel}])
        for i in range(2)
    ]
    await pipeline.wait_bound(uids, timeout=60)

    pods = pods_by_uid(store)
    assert sorted(pods[u]["spec"]["nodeName"] for u in uids) == ["e2e-dgx-h100-0", "e2e-dgx-h100-1"]  # clique e2e.a
    for uid in uids:
        held, users = allocation_of(store, claims_of(store, pods[uid])["channel"])
        assert {pool for pool, _ in held} == {pods[uid]["spec"]["nodeName"]} and len(held) == 8
        assert users == [pods[uid]["metadata"]["name"]]


async def test_a_compute_domains_gang_waits_with_the_clique_reason_rather_than_span_two_cliques(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    # h100-0 and h100-1 share a ToR (the gang's choice without a domain), each its own NVLink clique
    group, channel = compute_domain_gang(store, run_id, {"e2e-dgx-h100-0": "e2e.a", "e2e-dgx-h100-1": "e2e.b"})
    await pipeline.start_all()

    entries = [{"name": "channel", "resourceClaimTemplateName": channel}]
    uids = [member(store, f"{group}-{i}", group, entries) for i in range(2)]
    why = f"ComputeDomain {NAMESPACE}/{run_id}-imex keeps its pods in one NVLink clique ({CLIQUE_LABEL})"

    def told_why(outcomes: Outcomes) -> bool:  # (first, maybe, that a claim is not created yet)
        return all(any(why in o.event.reason for o in outcomes.of(u, BindingOutcome.UNSCHEDULABLE)) for u in uids)

    await pipeline.wait_until(told_why, what="the gang told it waits for one clique", timeout=60)
    assert [pipeline.outcomes.bound(u) for u in uids] == [None, None]
    pods = pods_by_uid(store)
    assert [pods[u]["spec"].get("nodeName") for u in uids] == [None, None]
