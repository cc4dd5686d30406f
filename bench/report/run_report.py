"""The report of a whole run: every section's figures and notes in order, the plots, and results.md."""

from __future__ import annotations

from pathlib import Path

from bench import pipeline_speed, plots, scale
from bench.report.document import build_figures, build_markdown, build_notes
from bench.report.trace_section import second_list_figures
from bench.results import Figure, Results
from bench.sections import BenchRun
from bench.trace_policies import PUBLISHED_UNALLOCATED_PCT
from engine import Mode


def run_figures(run: BenchRun) -> list[Figure]:
    """Every figure of results.json, in its order."""
    headlines = [p.headline() for p in run.pipeline]  # the highest offered load: pipeline.*.placers<n>
    figures = (
        build_figures(run.trace, run.device, run.speed, run.search, headlines)
        + second_list_figures("trace_multigpu20", run.multigpu)
        + pipeline_speed.step_figure_list(run.pipeline)
    )
    figures += scale.figures(run.scale)
    for section in run.extra:
        figures += section.figures
    return figures


def run_notes(run: BenchRun, figures: list[Figure]) -> list[str]:
    """Every note of the run; the pipeline's goals are read from its figures."""
    notes = build_notes(run.trace, run.device, run.speed, run.search)
    notes += scale.notes(run.scale) + pipeline_speed.goal_notes(figures)
    for section in run.extra:
        notes += section.notes
    return notes


def write_plots(run: BenchRun, run_dir: Path, machine: str) -> dict[str, Path]:
    """The four PNG plots, drawn into the run's folder: file name -> path."""
    return {
        "fragmentation_curve.png": plots.fragmentation_curve(
            run.trace, PUBLISHED_UNALLOCATED_PCT, run_dir / "fragmentation_curve.png", machine
        ),
        "quality_vs_baseline.png": plots.quality_vs_baseline(run.device, run_dir / "quality_vs_baseline.png", machine),
        "latency_histogram.png": plots.latency_histogram(
            [r for r in run.speed if r.mode == Mode.DEFAULT.value], run_dir / "latency_histogram.png", machine
        ),
        "decisions_per_s.png": plots.decisions_per_second(run.speed, run_dir / "decisions_per_s.png", machine),
    }


def run_markdown(results: Results, run: BenchRun) -> str:
    """results.md of the run."""
    return build_markdown(
        results,
        run.trace,
        run.device,
        run.speed,
        run.search,
        pipeline_speed.markdown_section(run.pipeline),
        scale_section=scale.markdown(run.scale),
        extra=run.extra,
    )
