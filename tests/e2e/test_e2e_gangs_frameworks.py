"""Gangs of KAI and of Kubernetes' Workload API through collector → Kafka → placer → binder → API server.

The ToR HyperNodes of the e2e cluster are named `rack` (spec.tierName), the level both gangs ask for.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from e2e_checks import double_booked, pod_state
from e2e_cluster import CLUSTER, NAMESPACE, PodSpec, pod_manifest, pods_by_uid
from e2e_pipeline import Pipeline

from schemas.events import BindingOutcome
from topoplace.dev.kubeapi import ObjectStore
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

TOR_OF = {node.name: node.tor for node in CLUSTER.nodes}
RACK = "rack"


def name_the_racks(store: ObjectStore) -> None:
    """The ToR HyperNodes carry the tier name the gangs' topology constraints use."""
    for tor in sorted(set(TOR_OF.values())):
        hypernode = store.get(kube_resources.HYPERNODES, tor)
        hypernode["spec"]["tierName"] = RACK
        store.replace(kube_resources.HYPERNODES, tor, hypernode)


def create_member(store: ObjectStore, name: str, gpus: int, **extra: Any) -> str:
    body = pod_manifest(PodSpec(name=name, gpus=gpus))
    body["metadata"]["annotations"] = extra.pop("annotations", {})
    body["spec"].update(extra)
    return str(store.create(kube_resources.PODS, body, namespace=NAMESPACE)["metadata"]["uid"])


def create_kai_gang(store: ObjectStore, name: str, members: int, gpus: int) -> list[str]:
    """A KAI PodGroup (minMember = its members, every one inside one rack) and its pods."""
    store.create(
        kube_resources.KAI_PODGROUPS,
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"minMember": members, "topologyConstraint": {"requiredTopologyLevel": RACK}},
        },
        namespace=NAMESPACE,
    )
    notes = {"pod-group-name": name}
    return [create_member(store, f"{name}-{i}", gpus, annotations=notes) for i in range(members)]


def unschedulable_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return dict(condition)
    return None


async def conditions_written(store: ObjectStore, uids: list[str], timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    """Each pod's PodScheduled=False condition, waited for on the API server's own change feed."""
    _, subscription = store.subscribe(kube_resources.PODS, NAMESPACE, None)
    try:
        async with asyncio.timeout(timeout):
            while True:
                pods = pods_by_uid(store)
                found = {uid: unschedulable_condition(pods[uid]) for uid in uids}
                if all(found.values()):
                    return {uid: c for uid, c in found.items() if c is not None}
                subscription.wakeup.clear()
                subscription.pending.clear()
                await subscription.wakeup.wait()
    finally:
        store.unsubscribe(subscription)


def nodes_of(store: ObjectStore, uids: list[str]) -> list[str]:
    in_cluster = pods_by_uid(store)
    return [pod_state(in_cluster[uid]).node for uid in uids]


async def test_a_kai_gang_is_bound_inside_one_rack_and_one_no_rack_holds_waits_whole(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    name_the_racks(store)
    await pipeline.start_all()
    # three 8-GPU members: only e2e-tor-0 (three 8-GPU nodes) holds them
    trio = create_kai_gang(store, f"{run_id}-trio", members=3, gpus=8)
    await pipeline.wait_bound(trio, timeout=60)
    nodes = nodes_of(store, trio)
    assert {TOR_OF[n] for n in nodes} == {"e2e-tor-0"}, nodes
    assert double_booked([pod_state(p) for p in pods_by_uid(store).values()]) == []

    # three more: 16 GPUs are left, all in e2e-tor-1: no rack holds the gang, so no member is bound
    wide = create_kai_gang(store, f"{run_id}-wide", members=3, gpus=8)
    conditions = await conditions_written(store, wide)
    assert not any(nodes_of(store, wide)), nodes_of(store, wide)
    for uid in wide:
        assert conditions[uid]["reason"] == "Unschedulable"
        assert pipeline.outcomes.bound(uid) is None


async def test_a_workload_api_gang_is_placed_at_its_min_count_and_the_rest_join_as_room_appears(
    pipeline: Pipeline, run_id: str
) -> None:
    """A scheduling.k8s.io PodGroup: gang minCount 2 of 3 members, every one in one rack."""
    store = pipeline.kube_api.store
    name_the_racks(store)
    await pipeline.start_all()
    group = f"{run_id}-train"
    link = {"podGroupName": group}
    # The members first: they wait for their PodGroup, so the gang goes out with all three at once.
    members = [create_member(store, f"{group}-{i}", 4, schedulingGroup=link) for i in range(3)]
    # Fill the cluster so that 4 GPUs are left in e2e-tor-0 and 8 (one node) in e2e-tor-1. The pods
    # come on one watch: once the fillers are bound the watcher has read the members before them.
    fillers = {"e2e-dgx-h100-0": 8, "e2e-dgx-h100-1": 8, "e2e-dgx1-v100-0": 4, "e2e-dgx-h100-2": 8}
    filler_uids = [
        create_member(store, f"{run_id}-fill-{i}", gpus, nodeSelector={"kubernetes.io/hostname": node})
        for i, (node, gpus) in enumerate(fillers.items())
    ]
    await pipeline.wait_bound(filler_uids, timeout=60)
    store.create(
        kube_resources.KUBE_PODGROUPS,
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": NAMESPACE},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": RACK}]},
            },
        },
        namespace=NAMESPACE,
    )
    # Placed one by one all three would fit (8 + 4 GPUs); as a gang in one rack only two do, on e2e-dgx1-v100-1.
    await pipeline.wait_until(
        lambda o: sum(o.bound(uid) is not None for uid in members) >= 2, what="the gang's minimum bound", timeout=60
    )
    bound = [uid for uid in members if pipeline.outcomes.bound(uid) is not None]
    waiting = [uid for uid in members if uid not in bound]
    assert len(bound) == 2 and nodes_of(store, bound) == ["e2e-dgx1-v100-1"] * 2
    condition = (await conditions_written(store, waiting))[waiting[0]]
    assert condition["reason"] == "Unschedulable" and not nodes_of(store, waiting)[0]

    # Room appears in the running members' rack: the member left out joins them there.
    store.delete(kube_resources.PODS, f"{run_id}-fill-3", namespace=NAMESPACE)
    await pipeline.wait_bound(waiting, timeout=60)
    assert nodes_of(store, waiting) == ["e2e-dgx-h100-2"]
    binding = pipeline.outcomes.bound(waiting[0])
    assert binding is not None and binding.event.outcome is BindingOutcome.BOUND
