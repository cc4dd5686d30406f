"""The pipeline's part of the report: its figures (per step, the headline, the goals), notes and Markdown."""

from __future__ import annotations

from collections.abc import Sequence

from bench.pipeline_speed.measurement import PipelineFigures, PipelineRun
from bench.pipeline_speed.plan import GOAL_OFFERED, GOAL_P99_MS, GOAL_PODS_PER_S, POD_KIND
from bench.results import Figure, Machine


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b > 0 else None


def headline_figures(headlines: Sequence[PipelineFigures | None]) -> list[Figure]:
    """`pipeline.<key>.placers<n>`: the highest offered load's figures of 1 placer, then 2 (None: not run)."""
    out = []
    for placers, p in zip((1, 2), headlines, strict=True):
        for key, unit in (
            ("sustained_pods_per_s", "pods/s"),
            ("p50_pending_to_bound_ms", "ms"),
            ("p99_pending_to_bound_ms", "ms"),
        ):
            measured: float | None = getattr(p, key) if p is not None else None
            out.append(
                Figure(
                    name=f"pipeline.{key}.placers{placers}",
                    value=measured,
                    unit=unit,
                    detail=""
                    if p is not None
                    else "not measured in this run: the pipeline did not start (the run's log says why)",
                )
            )
    return out


def step_figure_list(runs: Sequence[PipelineRun]) -> list[Figure]:
    """Per-step figures `pipeline.<key>.placers<n>.offered<rate>` and the 2-over-1 ratio per step."""
    out: list[Figure] = []
    by_placers = {r.placers: r for r in runs}
    for run in runs:
        if run.error:
            out.append(
                Figure(name=f"pipeline.not_measured.placers{run.placers}", value=None, unit="", detail=run.error)
            )
        for s in run.steps:
            suffix = f"placers{run.placers}.offered{s.offered_pods_per_s:g}"
            cpu = ", ".join(f"{name} {c:.2f}" for name, c in sorted(s.cores_by_service.items(), key=lambda kv: -kv[1]))
            detail = f"{s.pods} pods, {s.bound} bound, {s.unschedulable} unschedulable; cores used: {cpu}; {s.machine}"
            for key, unit in (
                ("sustained_pods_per_s", "pods/s"),
                ("p50_pending_to_bound_ms", "ms"),
                ("p99_pending_to_bound_ms", "ms"),
            ):
                out.append(
                    Figure(name=f"pipeline.{key}.{suffix}", value=round(getattr(s, key), 3), unit=unit, detail=detail)
                )
            out.append(Figure(name=f"pipeline.unschedulable.{suffix}", value=float(s.unschedulable), unit="pods"))
            out.append(Figure(name=f"pipeline.bind_conflicts.{suffix}", value=float(s.conflicts), unit="binds"))
    one, two = by_placers.get(1), by_placers.get(2)
    out += goal_figures(one)
    if one is not None and two is not None:
        for a, b in zip(one.steps, two.steps, strict=False):
            out.append(
                Figure(
                    name=f"pipeline.sustained_ratio_2_over_1.offered{a.offered_pods_per_s:g}",
                    value=_ratio(b.sustained_pods_per_s, a.sustained_pods_per_s),
                    unit="ratio",
                    detail="sustained pods/s with two placers over one; the machine-independent figure",
                )
            )
    return out


def goal_figures(one: PipelineRun | None) -> list[Figure]:
    """`pipeline.pods_per_s` (the most sustained with one placer) and `pipeline.p99_ms.500`, with their goals."""
    if one is None or not one.steps:
        return []
    best = max(one.steps, key=lambda s: s.sustained_pods_per_s)
    out = [
        Figure(
            name="pipeline.pods_per_s",
            value=round(best.sustained_pods_per_s, 3),
            unit="pods/s",
            baselines={"offered": best.offered_pods_per_s, "goal": GOAL_PODS_PER_S},
            detail="the most sustained pending -> bound with one placer and one binder over the offered loads",
        )
    ]
    at_goal = [s for s in one.steps if s.offered_pods_per_s == GOAL_OFFERED]
    if at_goal:
        step = at_goal[0]
        out.append(
            Figure(
                name=f"pipeline.p99_ms.{GOAL_OFFERED:g}",
                value=round(step.p99_pending_to_bound_ms, 3),
                unit="ms",
                baselines={"p50": round(step.p50_pending_to_bound_ms, 3), "goal": GOAL_P99_MS},
                detail=f"pending -> bound at {GOAL_OFFERED:g} pods/s offered ({step.pods} pods), one placer",
            )
        )
    return out


def goal_notes(figures: Sequence[Figure]) -> list[str]:
    """Each pipeline goal met or not, said plainly."""
    out = []
    for figure in figures:
        goal = figure.baselines.get("goal")
        if not figure.name.startswith("pipeline.") or goal is None or figure.value is None:
            continue
        met = figure.value >= goal if figure.unit == "pods/s" else figure.value <= goal
        verdict = "within" if met else "NOT within"
        out.append(f"{figure.name} = {figure.value:g} {figure.unit}: {verdict} its goal of {goal:g}.")
    return out


def markdown_section(runs: Sequence[PipelineRun]) -> str:
    """The pipeline table (one row per placer count and step), or why a pipeline was not measured."""
    machine = next((s.machine for r in runs for s in r.steps if s.machine), Machine.here().label())
    lines = [
        f"Real services as separate processes on the embedded broker and the test API server, on {machine}; "
        f"pods of the workload's `{POD_KIND.name}` kind (all fit), bound pods deleted between steps. "
        "Latency: create call returned → the binder's BindingEvent; sustained = bound / (last bound − first created). "
        "Cores: CPU seconds a process used during the step per second of it (1.00 = one core busy). "
        "Absolute figures are for this machine only; the 2-placer / 1-placer ratio is the comparable figure.",
        "",
        "| placers | offered pods/s | submitted pods/s | pods | bound | unschedulable | bind conflicts "
        "| sustained pods/s | p50 ms | p99 ms | busiest process (cores) | all processes (cores) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for s in run.steps:
            busiest = s.busiest()
            lines.append(
                f"| {run.placers} | {s.offered_pods_per_s:g} | {s.submitted_pods_per_s:.1f} | {s.pods} | {s.bound} "
                f"| {s.unschedulable} | {s.conflicts} | {s.sustained_pods_per_s:.1f} | {s.p50_pending_to_bound_ms:.0f} "
                f"| {s.p99_pending_to_bound_ms:.0f} | {f'{busiest[0]} {busiest[1]:.2f}' if busiest else '—'} "
                f"| {sum(s.cores_by_service.values()):.2f} |"
            )
    for r in runs:
        if r.error:
            lines.append(f"\n{r.placers} placer(s): not measured: {r.error}")
    by_placers = {r.placers: r for r in runs}
    if 1 in by_placers and 2 in by_placers:
        ratios = [
            f"{a.offered_pods_per_s:g}/s: {ratio:.2f}"
            for a, b in zip(by_placers[1].steps, by_placers[2].steps, strict=False)
            if (ratio := _ratio(b.sustained_pods_per_s, a.sustained_pods_per_s)) is not None
        ]
        if ratios:
            lines += ["", "Sustained pods/s, 2 placers / 1 placer, by offered load: " + "; ".join(ratios) + "."]
    return "\n".join(lines)
