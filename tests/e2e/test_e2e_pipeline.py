"""N pending pods through collector → Kafka → placer → binder → API server, one trace per pod."""

from __future__ import annotations

import pytest
from e2e_checks import PIPELINE_SERVICES, bindings_per_pod, double_booked, pod_state, services_by_trace, spans_of
from e2e_cluster import PodSpec, create_pod, events_about, gpus_per_node, pod_changes, pods_by_uid
from e2e_pipeline import Pipeline

from schemas.events import BindingOutcome, PlacementOutcome
from topoplace.telemetry import read_spans

pytestmark = pytest.mark.e2e

# 12 pods asking for 28 of the cluster's 40 GPUs: packed best-fit, every one fits in any order.
GPU_COUNTS = (8, 4, 4, 2, 2, 2, 1, 1, 1, 1, 1, 1)


async def test_pending_pods_end_bound_where_placed_with_their_devices_and_one_trace_each(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    pods = [PodSpec(name=f"{run_id}-pod-{i}", gpus=n) for i, n in enumerate(GPU_COUNTS)]
    # Half exist before the services start (the watcher's first list finds them),
    # half arrive while they run (its watch does).
    uids = {create_pod(store, pod): pod for pod in pods[: len(pods) // 2]}
    await pipeline.start_all()
    uids |= {create_pod(store, pod): pod for pod in pods[len(pods) // 2 :]}

    await pipeline.wait_settled(list(uids), timeout=45)
    await pipeline.stop_all()  # every span is in the traces file once the services have stopped

    outcomes = pipeline.outcomes
    in_cluster = pods_by_uid(store)
    states = [pod_state(in_cluster[uid]) for uid in uids]
    capacity = gpus_per_node()
    for uid, pod in uids.items():
        bound = outcomes.bound(uid)
        assert bound is not None, f"{pod.name}: not bound: {outcomes.bindings.get(uid)}"
        placement = outcomes.placement(uid, bound.event.decision_id)
        assert placement is not None and placement.outcome is PlacementOutcome.PLACED, pod.name
        state = pod_state(in_cluster[uid])
        assert state.node == placement.node == bound.event.node, pod.name
        assert state.annotated_node == placement.node, pod.name
        assert state.devices == placement.devices, pod.name
        indices = [d.index for d in state.devices]
        assert len(set(indices)) == pod.gpus, f"{pod.name} asked for {pod.gpus} GPUs, got {indices}"
        assert all(0 <= i < capacity[state.node] for i in indices), f"{pod.name}: {indices} on {state.node}"
    assert double_booked(states) == []
    assert all(bindings_per_pod(pod_changes(store)).get(uid) == 1 for uid in uids)

    spans = read_spans(str(pipeline.traces_file))
    services = services_by_trace(spans)
    for uid, pod in uids.items():
        bound = outcomes.bound(uid)
        assert bound is not None and bound.trace_id, f"{pod.name}: the binding carries no trace"
        assert services.get(bound.trace_id, set()) >= PIPELINE_SERVICES, f"{pod.name}: {services.get(bound.trace_id)}"
        pending = spans_of(spans, bound.trace_id, "pod.pending")
        assert [s.attributes.get("k8s.pod.uid") for s in pending] == [uid], pod.name
        decisions = spans_of(spans, bound.trace_id, "placer.decide")
        assert any(s.attributes.get("topoplace.node") == bound.event.node for s in decisions), pod.name
        assert spans_of(spans, bound.trace_id, "binder.bind"), pod.name


async def test_a_pod_that_can_never_fit_is_reported_unschedulable_with_a_reason_on_the_pod(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    largest_node = max(gpus_per_node().values())
    pod = PodSpec(name=f"{run_id}-too-big", gpus=largest_node * 2)
    await pipeline.start_all()
    uid = create_pod(store, pod)

    await pipeline.wait_settled([uid], timeout=30)

    outcomes = pipeline.outcomes
    assert outcomes.bound(uid) is None
    unschedulable = outcomes.of(uid, BindingOutcome.UNSCHEDULABLE)
    assert unschedulable and all(b.event.reason for b in unschedulable)
    state = pod_state(pods_by_uid(store)[uid])
    assert state.node == "" and state.devices == ()
    failed = [e for e in events_about(store, uid) if e.get("reason") == "FailedScheduling"]
    assert failed, f"no FailedScheduling Event on {pod.name}: {events_about(store, uid)}"
    assert all(e.get("type") == "Warning" and e.get("message") for e in failed)
    assert any(unschedulable[0].event.reason in e["message"] for e in failed), failed
