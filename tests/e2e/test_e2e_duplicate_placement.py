"""At-least-once is harmless: a placement delivered twice binds the pod once and reports BOUND twice."""

from __future__ import annotations

import pytest
from e2e_checks import bindings_per_pod, pod_state
from e2e_cluster import CLUSTER, PodSpec, create_pod, events_about, pod_changes, pods_by_uid
from e2e_pipeline import Outcomes, Pipeline, dead_letters

from schemas import topics
from schemas.events import BindingOutcome, DeadLetterEvent, DeviceAssignment, PlacementEvent, PlacementOutcome
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e


def outcomes_of(outcomes: Outcomes, uid: str, decision_id: str) -> list[BindingOutcome]:
    return [b.event.outcome for b in outcomes.bindings.get(uid, []) if b.event.decision_id == decision_id]


async def dead_letters_about(bootstrap: str, uid: str) -> list[DeadLetterEvent]:
    return [e for e in await dead_letters(bootstrap, topics.PLACEMENTS) if uid in e.value]


def assert_bound_once(pipeline: Pipeline, uid: str, placement: PlacementEvent) -> None:
    store = pipeline.kube_api.store
    state = pod_state(pods_by_uid(store)[uid])
    assert (state.node, state.devices) == (placement.node, placement.devices)
    assert bindings_per_pod(pod_changes(store)).get(uid) == 1
    scheduled = [e for e in events_about(store, uid) if e.get("reason") == "Scheduled"]
    assert len(scheduled) == 1, scheduled
    failed = [e for e in events_about(store, uid) if e.get("reason") == "FailedScheduling"]
    assert failed == []


async def test_the_placers_decision_sent_again_after_the_bind_is_bound_again_without_a_second_binding(
    pipeline: Pipeline, run_id: str
) -> None:
    await pipeline.start_all()
    uid = create_pod(pipeline.kube_api.store, PodSpec(name=f"{run_id}-dup", gpus=2))
    await pipeline.wait_until(lambda o: o.bound(uid) is not None, what="the pod bound")
    bound = pipeline.outcomes.bound(uid)
    assert bound is not None
    placement = pipeline.outcomes.placement(uid, bound.event.decision_id)
    assert placement is not None

    await pipeline.produce(topics.PLACEMENTS, placement.node, placement)
    await pipeline.wait_until(
        lambda o: len(outcomes_of(o, uid, placement.decision_id)) >= 2, what="the duplicate's outcome"
    )

    assert outcomes_of(pipeline.outcomes, uid, placement.decision_id) == [BindingOutcome.BOUND] * 2
    assert_bound_once(pipeline, uid, placement)
    assert await dead_letters_about(pipeline.bootstrap, uid) == []


async def test_the_same_placement_twice_in_a_row_binds_the_pod_once_and_both_report_bound(
    pipeline: Pipeline, run_id: str
) -> None:
    # No placer: the test is the one deciding, so both copies reach the binder
    # before it has answered either.
    await pipeline.start_collectors()
    await pipeline.start_binder()
    store = pipeline.kube_api.store
    uid = create_pod(store, PodSpec(name=f"{run_id}-twice", gpus=2))
    pod = pods_by_uid(store)[uid]
    node = CLUSTER.nodes[-1].name
    placement = PlacementEvent(
        decision_id=f"{run_id}-decision",
        uid=uid,
        namespace=pod["metadata"]["namespace"],
        name=pod["metadata"]["name"],
        pod_resource_version=pod["metadata"]["resourceVersion"],
        outcome=PlacementOutcome.PLACED,
        node=node,
        devices=(DeviceAssignment(index=6), DeviceAssignment(index=7)),
    )

    for _ in range(2):
        await pipeline.produce(topics.PLACEMENTS, node, placement)
    await pipeline.wait_until(
        lambda o: len(outcomes_of(o, uid, placement.decision_id)) >= 2, what="both copies' outcomes"
    )

    assert outcomes_of(pipeline.outcomes, uid, placement.decision_id) == [BindingOutcome.BOUND] * 2
    assert_bound_once(pipeline, uid, placement)
    assert await dead_letters_about(pipeline.bootstrap, uid) == []


COPIES = 4  # of each placement


async def test_duplicated_placements_of_pods_deleted_meanwhile_leave_their_devices_free(
    pipeline: Pipeline, run_id: str
) -> None:
    await pipeline.start_collectors()
    store = pipeline.kube_api.store
    node = CLUSTER.nodes[0].name
    # One pair of devices per pod: 4 pods cover the node's 8 GPUs.
    pairs = [(DeviceAssignment(index=2 * i), DeviceAssignment(index=2 * i + 1)) for i in range(4)]

    def placement_for(uid: str, devices: tuple[DeviceAssignment, ...], decision_id: str) -> PlacementEvent:
        pod = pods_by_uid(store)[uid]
        return PlacementEvent(
            decision_id=decision_id,
            uid=uid,
            namespace=pod["metadata"]["namespace"],
            name=pod["metadata"]["name"],
            pod_resource_version=pod["metadata"]["resourceVersion"],
            outcome=PlacementOutcome.PLACED,
            node=node,
            devices=devices,
        )

    gone = []
    for i, devices in enumerate(pairs):
        uid = create_pod(store, PodSpec(name=f"{run_id}-gone-{i}", gpus=2))
        gone.append(placement_for(uid, devices, f"{run_id}-gone-{i}"))
    for placement in gone:
        store.delete(kube_resources.PODS, placement.name, namespace=placement.namespace)
    # Every copy in one record batch, on the topic before the binder starts: it reads them together.
    await pipeline.produce(topics.PLACEMENTS, node, *(p for p in gone for _ in range(COPIES)))
    await pipeline.start_binder()
    await pipeline.wait_until(
        lambda o: all(len(outcomes_of(o, p.uid, p.decision_id)) >= COPIES for p in gone), what="every copy's outcome"
    )
    assert all(outcomes_of(pipeline.outcomes, p.uid, p.decision_id) == [BindingOutcome.FAILED] * COPIES for p in gone)

    following = []
    for i, devices in enumerate(pairs):
        uid = create_pod(store, PodSpec(name=f"{run_id}-next-{i}", gpus=2))
        following.append(placement_for(uid, devices, f"{run_id}-next-{i}"))
    await pipeline.produce(topics.PLACEMENTS, node, *following)
    await pipeline.wait_until(
        lambda o: all(outcomes_of(o, p.uid, p.decision_id) for p in following), what="the next pods' outcomes"
    )

    assert all(outcomes_of(pipeline.outcomes, p.uid, p.decision_id) == [BindingOutcome.BOUND] for p in following), (
        pipeline.outcomes.describe([p.uid for p in following])
    )
