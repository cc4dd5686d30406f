"""The report of a run from its raw results: the figures of results.json, the notes, and results.md.

Each section's part lives in its own module (trace_section, device_section, speed_section; the pipeline's
and the scale's in bench.pipeline_speed and bench.scale); this module puts them in the report's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bench import pipeline_speed
from bench.device_replay import DevicePolicyResult
from bench.engine_speed import SpeedRun
from bench.pipeline_speed import PipelineFigures
from bench.report.device_section import device_figures, device_markdown, device_notes
from bench.report.speed_section import engine_figures, engine_markdown, search_figures, search_markdown, search_notes
from bench.report.trace_section import trace_figures, trace_markdown, trace_notes
from bench.results import Figure, Results, SectionReport
from bench.search_speed import SearchFigure
from bench.trace_replay import ReplayResult


def build_figures(
    trace: Mapping[str, Sequence[ReplayResult]],
    device: Sequence[DevicePolicyResult],
    speed: Sequence[SpeedRun],
    search: Sequence[SearchFigure],
    pipeline: Sequence[PipelineFigures | None],
) -> list[Figure]:
    """The figures of sections 1 to 5; `pipeline` holds the headline step of 1 placer, then of 2 (None: not run)."""
    return (
        trace_figures(trace)
        + device_figures(device)
        + engine_figures(speed)
        + search_figures(search)
        + pipeline_speed.headline_figures(pipeline)
    )


def build_notes(
    trace: Mapping[str, Sequence[ReplayResult]],
    device: Sequence[DevicePolicyResult],
    speed: Sequence[SpeedRun],
    search: Sequence[SearchFigure] = (),
) -> list[str]:
    """Plain-language notes on sections 1 to 4: where topoplace is behind is said, not hidden."""
    return trace_notes(trace) + device_notes(device) + search_notes(search)


def build_markdown(
    results: Results,
    trace: Mapping[str, Sequence[ReplayResult]],
    device: Sequence[DevicePolicyResult],
    speed: Sequence[SpeedRun],
    search: Sequence[SearchFigure],
    pipeline_section: str = "",
    *,
    scale_section: str = "",
    extra: Sequence[SectionReport] = (),
) -> str:
    """results.md: a header, every section's tables and plots in order, then the run's notes."""
    out = [
        f"# topoplace benchmark ({results.profile} profile)",
        "",
        f"Command: `{results.command}` — generated {results.generated_at} on {results.machine.label()} "
        f"in {results.inputs.get('seconds', '?')} s. Absolute times are for this machine only.",
        "",
        "## Fragmentation on the Alibaba GPU trace (FGD protocol)",
        "",
        f"Input: {results.inputs.get('nodes')} and {results.inputs.get('pods')}; "
        "unallocated GPU % when arrived GPU demand reaches 100 % of capacity.",
        "",
        trace_markdown(trace),
        "",
        "![fragmentation curve](fragmentation_curve.png)",
        "",
        "## Device-level link quality (synthetic fixture clusters)",
        "",
        *device_markdown(device),
        "",
        "![quality vs baseline](quality_vs_baseline.png)",
        "",
        "## Engine speed",
        "",
        engine_markdown(speed),
        "",
        "![decisions per second](decisions_per_s.png)",
        "",
        "![latency histogram](latency_histogram.png)",
        "",
        *search_markdown(search),
        "## Pipeline speed through the broker",
        "",
        pipeline_section or "Not measured in this run.",
        "",
        "## Scale: decisions, gangs and the placer's memory at 1,000-10,000 nodes",
        "",
        scale_section or "Not measured in this run.",
        "",
    ]
    for section in extra:
        out += [f"## {section.title}", "", section.markdown or "Not measured in this run.", ""]
    out += ["## Notes", ""]
    out += [f"- {n}" for n in results.notes]
    out.append("")
    return "\n".join(out)
