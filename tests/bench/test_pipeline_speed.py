"""Pipeline speed: figures from timestamps, the step plans, outcome following, one small real run."""

from __future__ import annotations

import asyncio
import math
import os

import msgspec
import pytest
from opentelemetry.context import Context

from bench import pipeline_speed as ps
from schemas.events import BindingEvent, BindingOutcome, Event, LifecyclePhase, PodLifecycleEvent
from schemas.topology import Vendor
from topoplace.dev.demo import cluster as demo_cluster
from topoplace.kafka.records import Received


def _step(rate: float = 10.0, pods: int = 100) -> ps.LoadStep:
    return ps.LoadStep(offered_pods_per_s=rate, pods=pods)


def test_latency_percentiles_and_rates_follow_from_the_timestamps() -> None:
    # 100 pods created every 0.1 s; pod i bound (i + 1) ms after it was created.
    submitted = {f"p{i}": 1000.0 + 0.1 * i for i in range(100)}
    bound = {f"p{i}": submitted[f"p{i}"] + (i + 1) / 1000.0 for i in range(100)}
    f = ps.step_figures(placers=2, step=_step(10.0, 100), submitted_at=submitted, bound_at=bound, unschedulable=0)
    # Linear interpolation over latencies 1..100 ms: p50 at rank 49.5 -> 50.5, p99 at rank 98.01 -> 99.01.
    assert f.p50_pending_to_bound_ms == pytest.approx(50.5, abs=1e-6)
    assert f.p99_pending_to_bound_ms == pytest.approx(99.01, abs=1e-6)
    # Last bound: created at 9.9 s + 0.1 s of latency -> 100 pods in 10 s.
    assert f.sustained_pods_per_s == pytest.approx(10.0)
    assert f.submitted_pods_per_s == pytest.approx(10.0)  # 99 gaps of 0.1 s
    assert (f.placers, f.pods, f.bound, f.unschedulable, f.unfinished) == (2, 100, 100, 0, 0)


def test_refused_and_unfinished_pods_are_counted_apart_from_the_bound() -> None:
    submitted = {f"p{i}": float(i) for i in range(10)}
    bound = {"p0": 2.0, "p1": 3.0, "p2": 4.0}
    f = ps.step_figures(placers=1, step=_step(1.0, 10), submitted_at=submitted, bound_at=bound, unschedulable=4)
    assert (f.bound, f.unschedulable, f.unfinished) == (3, 4, 3)
    assert f.sustained_pods_per_s == pytest.approx(3 / 4.0)  # first created at 0, last bound at 4


def test_no_pod_bound_gives_no_rate_and_no_latency() -> None:
    f = ps.step_figures(placers=1, step=_step(1.0, 2), submitted_at={"a": 0.0, "b": 1.0}, bound_at={}, unschedulable=2)
    assert f.sustained_pods_per_s == 0.0
    assert math.isnan(f.p50_pending_to_bound_ms) and math.isnan(f.p99_pending_to_bound_ms)


def test_a_bound_pod_that_was_never_submitted_is_an_error() -> None:
    with pytest.raises(ValueError, match="bound_at.*ghost"):
        ps.step_figures(placers=1, step=_step(), submitted_at={"a": 0.0}, bound_at={"ghost": 1.0}, unschedulable=0)


@pytest.mark.parametrize("profile", ["short", "full"])
def test_plans_rise_in_load_and_every_step_fits_at_once(profile: str) -> None:
    plan = ps.step_plan(profile)
    rates = [s.offered_pods_per_s for s in plan]
    assert rates == sorted(rates) and len(set(rates)) == len(rates) >= 3
    assert all(1 <= s.pods <= ps.STEP_CAPACITY for s in plan)


def test_full_plan_has_more_steps_and_more_pods_than_short() -> None:
    short, full = ps.step_plan("short"), ps.step_plan("full")
    assert len(full) > len(short)
    assert sum(s.pods for s in full) > sum(s.pods for s in short)


def test_step_capacity_is_what_the_demo_clusters_gpus_hold() -> None:
    # A shared pod takes 25 of a GPU's 100 cores and 4000 MiB of its memory: a GPU holds
    # as many as both allow.
    cores = int(ps.POD_KIND.requests["nvidia.com/gpucores"])
    memory = int(ps.POD_KIND.requests["nvidia.com/gpumem"])
    held = sum(
        min(d.cores // cores, d.memory_mib // memory)
        for node in demo_cluster.default_cluster().nodes
        for d in demo_cluster.topology_of(node).devices
        if d.vendor == Vendor.NVIDIA
    )
    assert held >= ps.STEP_CAPACITY


def test_unknown_profile_and_bad_steps_are_refused_with_the_field() -> None:
    with pytest.raises(ValueError, match="profile.*huge"):
        ps.step_plan("huge")
    with pytest.raises(ValueError, match="step 0: offered_pods_per_s"):
        ps.check_plan([_step(0.0, 10)])
    with pytest.raises(ValueError, match="step 1: pods"):
        ps.check_plan([_step(), _step(10.0, ps.STEP_CAPACITY + 1)])


def test_cpu_seconds_are_utime_plus_stime_after_the_command_name() -> None:
    # Fields 3..13 are 0..10 here, then utime (field 14) and stime (field 15) in clock ticks.
    line = "1234 (py (x) y) S " + " ".join(str(i) for i in range(1, 11)) + " 250 50 7 7 20 0"
    assert ps.cpu_seconds(line, 100) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="stat_line"):
        ps.cpu_seconds("1 (x) S 1 2", 100)


def test_cpu_of_live_processes_is_read_and_gone_ones_are_left_out() -> None:
    seconds = ps.read_cpu_seconds({"me": os.getpid(), "gone": 2**31 - 1})
    assert set(seconds) == {"me"} and seconds["me"] > 0


def test_cores_used_is_cpu_time_per_wall_second_and_busiest_is_the_max() -> None:
    cores = ps.cores_used({"binder": 1.0, "placer": 2.0, "gone": 0.0}, {"binder": 2.5, "placer": 2.5}, 2.0)
    assert cores == {"binder": 0.75, "placer": 0.25}
    assert ps.cores_used({"a": 0.0}, {"a": 1.0}, 0.0) == {}
    f = msgspec.structs.replace(_figures(1, 10.0, 5.0), cores_by_service=cores)
    assert f.busiest() == ("binder", 0.75)
    assert _figures(1, 10.0, 5.0).busiest() is None


def _figures(placers: int, rate: float, sustained: float) -> ps.PipelineFigures:
    return ps.PipelineFigures(
        placers=placers,
        offered_pods_per_s=rate,
        sustained_pods_per_s=sustained,
        p50_pending_to_bound_ms=10.0,
        p99_pending_to_bound_ms=20.0,
        pods=5,
        bound=5,
    )


def test_headline_is_the_highest_offered_load() -> None:
    run = ps.PipelineRun(placers=1, steps=(_figures(1, 50.0, 40.0), _figures(1, 200.0, 60.0), _figures(1, 100.0, 55.0)))
    headline = run.headline()
    assert headline is not None and headline.offered_pods_per_s == 200.0
    assert ps.PipelineRun(placers=1, error="broken").headline() is None


def test_figures_per_step_and_the_two_over_one_ratio() -> None:
    one = ps.PipelineRun(placers=1, steps=(_figures(1, 20.0, 20.0), _figures(1, 100.0, 40.0)))
    two = ps.PipelineRun(placers=2, steps=(_figures(2, 20.0, 20.0), _figures(2, 100.0, 60.0)))
    by_name = {f.name: f for f in ps.step_figure_list([one, two])}
    assert by_name["pipeline.sustained_pods_per_s.placers2.offered100"].value == 60.0
    assert by_name["pipeline.p99_pending_to_bound_ms.placers1.offered20"].value == 20.0
    assert by_name["pipeline.unschedulable.placers1.offered100"].value == 0.0
    assert by_name["pipeline.bind_conflicts.placers2.offered20"].value == 0.0
    assert by_name["pipeline.sustained_ratio_2_over_1.offered100"].value == pytest.approx(60.0 / 40.0)
    assert by_name["pipeline.sustained_ratio_2_over_1.offered20"].value == pytest.approx(1.0)


def test_a_pipeline_that_failed_is_reported_with_its_reason() -> None:
    failed = ps.PipelineRun(placers=2, error="RuntimeError: placer-1 exited early")
    figures = ps.step_figure_list([failed])
    assert [(f.name, f.value) for f in figures] == [("pipeline.not_measured.placers2", None)]
    assert "placer-1 exited early" in figures[0].detail
    assert "placer-1 exited early" in ps.markdown_section([failed])


def test_markdown_has_a_row_per_step_and_the_ratio() -> None:
    one = ps.PipelineRun(placers=1, steps=(_figures(1, 20.0, 20.0), _figures(1, 100.0, 40.0)))
    busy = msgspec.structs.replace(_figures(2, 100.0, 50.0), cores_by_service={"binder": 0.5, "placer-0": 0.25})
    two = ps.PipelineRun(placers=2, steps=(_figures(2, 20.0, 20.0), busy))
    text = ps.markdown_section([one, two])
    assert "| binder 0.50 | 0.75 |" in text  # the busiest process, then all of them together
    rows = [line for line in text.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert len(rows) == 4
    assert "100/s: 1.25" in text
    assert "CPUs" in text  # the machine is named


def _received(event: Event, offset: int) -> Received:
    return Received(
        topic="t", partition=0, offset=offset, key=None, event=event, trace_context=Context(), timestamp_ms=0
    )


def _binding(uid: str, outcome: BindingOutcome, at: float) -> BindingEvent:
    return BindingEvent(decision_id="d", uid=uid, namespace="default", name=uid, outcome=outcome, finished_at=at)


async def test_outcomes_keep_the_first_bind_and_ignore_retries() -> None:
    outcomes = ps.BindingOutcomes()
    for i, event in enumerate(
        [
            _binding("a", BindingOutcome.CONFLICT, 1.0),
            _binding("a", BindingOutcome.BOUND, 2.0),
            _binding("a", BindingOutcome.UNSCHEDULABLE, 3.0),  # after the bind: the pod stays bound
            _binding("b", BindingOutcome.UNSCHEDULABLE, 4.0),
            _binding("b", BindingOutcome.BOUND, 5.0),  # parked, then placed once room appeared
            PodLifecycleEvent(uid="a", namespace="default", name="a", phase=LifecyclePhase.DELETED),
            PodLifecycleEvent(uid="c", namespace="default", name="c", phase=LifecyclePhase.BOUND),
        ]
    ):
        await outcomes.handle(_received(event, i))
    assert outcomes.bound_at == {"a": 2.0, "b": 5.0}
    assert outcomes.unschedulable == set()
    assert outcomes.deleted == {"a"}
    assert outcomes.conflicts == {"a": 1}
    assert outcomes.final({"a", "b", "c"}) == 2


async def test_wait_until_returns_when_an_outcome_makes_it_true() -> None:
    outcomes = ps.BindingOutcomes()

    async def bind_later() -> None:
        await outcomes.handle(_received(_binding("x", BindingOutcome.BOUND, 1.0), 0))

    task = asyncio.create_task(bind_later())
    assert await outcomes.wait_until(lambda: "x" in outcomes.bound_at, timeout_s=5.0)
    await task
    assert not await outcomes.wait_until(lambda: "never" in outcomes.bound_at, timeout_s=0.05)


async def test_a_few_pods_through_the_real_pipeline_with_two_placers() -> None:
    run = await ps.measure_steps(placers=2, steps=[_step(10.0, 6)], timeout_s=30.0)
    assert run.error == ""
    (step,) = run.steps
    assert (step.pods, step.bound, step.unschedulable, step.unfinished) == (6, 6, 0, 0)
    assert 0 < step.p50_pending_to_bound_ms <= step.p99_pending_to_bound_ms < 30_000
    assert step.sustained_pods_per_s > 0
    assert {"binder", "placer-0", "placer-1", "broker", "load-generator"} <= set(step.cores_by_service)


def test_goal_figures_name_the_best_sustained_rate_and_the_p99_at_500_offered() -> None:
    at_goal = msgspec.structs.replace(_figures(1, ps.GOAL_OFFERED, 58.0), p99_pending_to_bound_ms=7000.0)
    run = ps.PipelineRun(placers=1, steps=(_figures(1, 50.0, 45.0), _figures(1, 200.0, 61.0), at_goal))
    figures = {f.name: f for f in ps.goal_figures(run)}
    assert figures["pipeline.pods_per_s"].value == 61.0  # the best step, not the last one
    assert figures["pipeline.pods_per_s"].baselines == {"offered": 200.0, "goal": ps.GOAL_PODS_PER_S}
    assert figures["pipeline.p99_ms.500"].value == 7000.0
    notes = ps.goal_notes(list(figures.values()))
    assert "pipeline.pods_per_s = 61 pods/s: NOT within its goal of 2000." in notes
    assert "pipeline.p99_ms.500 = 7000 ms: NOT within its goal of 100." in notes
    fast = ps.PipelineRun(placers=1, steps=(msgspec.structs.replace(at_goal, sustained_pods_per_s=2500.0),))
    assert ps.goal_notes(ps.goal_figures(fast))[0].endswith("within its goal of 2000.")
    assert "NOT" not in ps.goal_notes(ps.goal_figures(fast))[0]
    assert ps.goal_figures(ps.PipelineRun(placers=1, steps=())) == []


def test_both_plans_end_at_the_goals_offered_load() -> None:
    for profile in ("short", "full"):
        assert ps.step_plan(profile)[-1].offered_pods_per_s == ps.GOAL_OFFERED
