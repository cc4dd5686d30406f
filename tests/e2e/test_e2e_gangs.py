"""Gangs through collector → Kafka → placer → binder → API server: all members in one ToR, or none."""

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


def create_gang(pipeline: Pipeline, name: str, members: int, gpus: int, *, highest_tier: int) -> list[str]:
    """A Volcano PodGroup (hard network constraint) and its member pods; returns the members' uids."""
    store = pipeline.kube_api.store
    store.create(
        "podgroups.scheduling.volcano.sh",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"minMember": members, "networkTopology": {"mode": "hard", "highestTierAllowed": highest_tier}},
        },
        namespace=NAMESPACE,
    )
    uids = []
    for i in range(members):
        body = pod_manifest(PodSpec(name=f"{name}-{i}", gpus=gpus))
        body["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": name}
        uids.append(str(store.create(kube_resources.PODS, body, namespace=NAMESPACE)["metadata"]["uid"]))
    return uids


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


async def test_a_gang_is_bound_whole_inside_one_tor_and_one_that_cannot_fit_holds_nothing(
    pipeline: Pipeline, run_id: str
) -> None:
    await pipeline.start_all()
    fits = create_gang(pipeline, f"{run_id}-pair", members=2, gpus=8, highest_tier=1)
    too_big = create_gang(pipeline, f"{run_id}-wide", members=4, gpus=8, highest_tier=1)
    await pipeline.wait_settled(fits + too_big, timeout=60)

    store = pipeline.kube_api.store
    in_cluster = pods_by_uid(store)
    states = [pod_state(in_cluster[uid]) for uid in fits]
    for uid in fits:
        bound = pipeline.outcomes.bound(uid)
        assert bound is not None, f"{uid}: {pipeline.outcomes.bindings.get(uid)}"
        assert bound.event.outcome is BindingOutcome.BOUND
    nodes = [s.node for s in states]
    assert len({TOR_OF[n] for n in nodes}) == 1, f"members spread over ToRs: {nodes}"
    assert all(len(s.devices) == 8 for s in states)
    assert double_booked(states) == []

    # Four 8-GPU members fit no ToR of this cluster: none is bound, each says why on the pod itself.
    conditions = await conditions_written(store, too_big)
    in_cluster = pods_by_uid(store)
    for uid in too_big:
        assert not in_cluster[uid]["spec"].get("nodeName"), uid
        assert conditions[uid]["reason"] == "Unschedulable"
        assert "no hypernode of tier <= 1" in conditions[uid]["message"]
        # why the ToR tier was refused, as the gang's decision carries it (refused_tiers)
        assert "; tier 1" in conditions[uid]["message"] and "pending member(s) fit in" in conditions[uid]["message"]
