"""The placer killed and restarted while pods keep arriving: no pod lost, none bound twice, no device twice."""

from __future__ import annotations

import asyncio

import pytest
from e2e_checks import PIPELINE_SERVICES, bindings_per_pod, double_booked, pod_state, services_by_trace, spans_of
from e2e_cluster import PodSpec, create_pod, pod_changes, pods_by_uid
from e2e_pipeline import Pipeline
from scripted_engine import ScriptedEngine

import engine
from engine import Decision, Mode, PodRequest, Snapshot
from schemas.events import BindingOutcome
from topoplace.telemetry import read_spans

pytestmark = pytest.mark.e2e

KILLED_AT_DECISION = 3


def wave(run_id: str, name: str, gpus: tuple[int, ...]) -> list[PodSpec]:
    return [PodSpec(name=f"{run_id}-{name}-{i}", gpus=n) for i, n in enumerate(gpus)]


class CountingEngine:
    """The real engine, announcing its n-th decision, made but not yet published.

    kill: also cancel the task deciding it, the placer's stream of pending pods,
    so the decision's publication is cut off where it stands and its offset is
    never committed, as when the process dies.
    """

    def __init__(self, nth: int, *, kill: bool) -> None:
        self.decisions = 0
        self.nth = nth
        self.kill = kill
        self.reached = asyncio.Event()
        self.interrupted_uid = ""  # the pod of the n-th decision

    def __call__(self, snapshot: Snapshot, request: PodRequest, mode: Mode) -> Decision:
        decision = engine.place(snapshot, request, mode)
        self.decisions += 1
        if self.decisions == self.nth:
            self.interrupted_uid = request.uid
            self.reached.set()
            stream = asyncio.current_task()
            if self.kill and stream is not None:
                stream.cancel()  # lands at the publication's first await
        return decision


@pytest.mark.parametrize("kill", [True, False], ids=["task-cancelled", "stop-set"])
async def test_a_placer_restarted_mid_stream_loses_no_pod_and_binds_none_twice(
    pipeline: Pipeline, run_id: str, kill: bool
) -> None:
    store = pipeline.kube_api.store
    # 16 pods asking for 24 of the cluster's 40 GPUs: every one fits, so each must end bound.
    before = wave(run_id, "before", (1, 2, 1, 2, 1, 2))
    while_down = wave(run_id, "down", (2, 1, 2, 1, 1))
    after = wave(run_id, "after", (1, 2, 1, 2, 1))
    await pipeline.start_collectors()
    counting = CountingEngine(KILLED_AT_DECISION, kill=kill)
    placer = await pipeline.start_placer(engine=ScriptedEngine(counting))
    await pipeline.start_binder()

    first = [create_pod(store, pod) for pod in before]
    # Stopped in the middle of the wave, as its 3rd decision is being published.
    await pipeline.wait_for_event(counting.reached, what=f"decision {KILLED_AT_DECISION}")
    await pipeline.stop(placer, kill=kill)
    second = [create_pod(store, pod) for pod in while_down]
    await pipeline.start_placer()
    third = [create_pod(store, pod) for pod in after]
    uids = first + second + third

    await pipeline.wait_settled(uids, timeout=45)
    await pipeline.stop_all()

    outcomes = pipeline.outcomes
    names = {uid: pod.name for uid, pod in zip(uids, before + while_down + after, strict=True)}
    in_cluster = pods_by_uid(store)
    binds = bindings_per_pod(pod_changes(store))
    for uid in uids:
        bound = outcomes.bound(uid)
        assert bound is not None, f"{names[uid]} not bound: {outcomes.bindings.get(uid)}"
        # Re-deliveries may report BOUND again, always for the same node and devices.
        places = {(b.event.node, b.event.devices) for b in outcomes.of(uid, BindingOutcome.BOUND)}
        assert len(places) == 1, f"{names[uid]} reported bound to {places}"
        state = pod_state(in_cluster[uid])
        assert (state.node, state.devices) == (bound.event.node, bound.event.devices), names[uid]
        assert binds.get(uid) == 1, f"{names[uid]} bound {binds.get(uid, 0)} times"
    assert double_booked([pod_state(in_cluster[uid]) for uid in uids]) == []

    spans = read_spans(str(pipeline.traces_file))
    services = services_by_trace(spans)
    for uid in uids:
        bound = outcomes.bound(uid)
        assert bound is not None and services.get(bound.trace_id, set()) >= PIPELINE_SERVICES, names[uid]
    if kill:
        # The interrupted decision's pending pod was never committed: the restarted placer decided it again.
        interrupted = outcomes.bound(counting.interrupted_uid)
        assert interrupted is not None
        assert len(spans_of(spans, interrupted.trace_id, "placer.decide")) >= 2
