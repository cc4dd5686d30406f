"""Pipeline speed through the broker: sustained pods/s and pending -> bound latency.

The real pipeline, started as the demo starts it (`harness`): the embedded broker, the test
Kubernetes API server seeded with the demo cluster's nodes and network tree, and
the collectors, placer(s) and binder as separate `topoplace` processes (two
placers share one consumer group). For each load step of the plan (`plan`), pods that all fit are
created at the offered rate (`load_generator`); each is timed from the moment its create call
returned (the pod exists, pending) to its BindingEvent's `finished_at` (the
binder's clock: the bind is done). The step's pods are then deleted and the
deletions seen on `pods.lifecycle` before the next step, so every step starts
on an empty cluster of the same pipeline. Each process's CPU time over a step
(from /proc) shows which one limits the rate (`measurement`). Figures, notes and the
report's section: `report`.
"""

from bench.pipeline_speed.harness import measure_profile, measure_steps, running_pipeline
from bench.pipeline_speed.load_generator import BindingOutcomes, RunningPipeline
from bench.pipeline_speed.measurement import (
    PipelineFigures,
    PipelineRun,
    cores_used,
    cpu_seconds,
    read_cpu_seconds,
    step_figures,
)
from bench.pipeline_speed.plan import (
    GOAL_OFFERED,
    GOAL_P99_MS,
    GOAL_PODS_PER_S,
    PLANS,
    POD_KIND,
    STEP_CAPACITY,
    LoadStep,
    check_plan,
    step_plan,
)
from bench.pipeline_speed.report import (
    goal_figures,
    goal_notes,
    headline_figures,
    markdown_section,
    step_figure_list,
)

__all__ = [
    "GOAL_OFFERED",
    "GOAL_P99_MS",
    "GOAL_PODS_PER_S",
    "PLANS",
    "POD_KIND",
    "STEP_CAPACITY",
    "BindingOutcomes",
    "LoadStep",
    "PipelineFigures",
    "PipelineRun",
    "RunningPipeline",
    "check_plan",
    "cores_used",
    "cpu_seconds",
    "goal_figures",
    "goal_notes",
    "headline_figures",
    "markdown_section",
    "measure_profile",
    "measure_steps",
    "read_cpu_seconds",
    "running_pipeline",
    "step_figure_list",
    "step_figures",
    "step_plan",
]
