"""Sections 3 and 4 of the report: engine speed (whole-snapshot decisions) and the per-node device search
against exhaustive enumeration; their figures, notes and Markdown tables."""

from __future__ import annotations

from collections.abc import Sequence

from bench import search_speed
from bench.engine_speed import SpeedRun
from bench.report.stats import markdown_table
from bench.results import Figure
from bench.search_speed import SearchFigure


def engine_figures(speed: Sequence[SpeedRun]) -> list[Figure]:
    """`engine.<key>.n<nodes>` of the default mode, with the HAMi mode of the same size as its baseline."""
    figures = []
    for run in speed:
        if run.mode != "default":
            continue
        twin = next((s for s in speed if s.nodes == run.nodes and s.mode == "hami"), None)
        for key, value, twin_value, unit in (
            ("decisions_per_s", run.decisions_per_s, twin.decisions_per_s if twin else None, "decisions/s"),
            ("p50_ms", run.percentile_ms(50), twin.percentile_ms(50) if twin else None, "ms"),
            ("p99_ms", run.percentile_ms(99), twin.percentile_ms(99) if twin else None, "ms"),
        ):
            figures.append(
                Figure(
                    name=f"engine.{key}.n{run.nodes}",
                    value=round(value, 4),
                    unit=unit,
                    baselines={"topoplace-hami": round(twin_value, 4)} if twin_value is not None else {},
                    detail=f"{len(run.latencies_ms)} decisions, whole-snapshot place(), one process",
                )
            )
    return figures


def engine_markdown(speed: Sequence[SpeedRun]) -> str:
    """One row per cluster size: decisions/s, p50 and p99 of both modes."""
    rows = []
    for n in sorted({s.nodes for s in speed}):
        row = [str(n)]
        for mode in ("default", "hami"):
            run = next((x for x in speed if x.nodes == n and x.mode == mode), None)
            row += (
                [f"{run.decisions_per_s:.1f}", f"{run.percentile_ms(50):.2f}", f"{run.percentile_ms(99):.2f}"]
                if run
                else ["—"] * 3
            )
        rows.append(row)
    return markdown_table(
        ["nodes", "default dec/s", "default p50 ms", "default p99 ms", "hami dec/s", "hami p50 ms", "hami p99 ms"],
        rows,
    )


def search_figures(search: Sequence[SearchFigure]) -> list[Figure]:
    """`search.ms.<topology>.<n>dev.k<k>` against enumeration, then the search step's speed-ups."""
    figures = [
        Figure(
            name=f"search.ms.{s.topology.split(' ')[0]}.{s.devices}dev.k{s.request}",
            value=round(s.search_ms, 4),
            unit="ms",
            baselines={
                "step_cold": round(s.step_cold_ms, 4),
                **({"exhaustive": round(s.exhaustive_ms, 4)} if s.exhaustive_ms is not None else {}),
            },
            detail=f"{s.sets} sets; exact={s.exact}; same answer as exhaustive={s.same_answer}",
        )
        for s in search
    ]
    return figures + search_speed.speedup_figures(search)


def search_notes(search: Sequence[SearchFigure]) -> list[str]:
    """Where the engine's per-node search is slower than plain enumeration, said plainly: its cold search step
    (pair table + search) against the enumeration (pair table + every set), both medians of the same run."""

    def row_label(f: SearchFigure) -> str:
        return f"{f.topology.split(' ')[0]} k={f.request}"

    compared = [f for f in search if f.exhaustive_ms is not None]
    slower = [row_label(f) for f in compared if f.exhaustive_ms is not None and f.step_cold_ms > f.exhaustive_ms]
    faster = [row_label(f) for f in compared if f.exhaustive_ms is not None and f.step_cold_ms <= f.exhaustive_ms]
    beyond = [f for f in search if f.exhaustive_ms is None]
    if not compared:
        return []
    if not slower:
        head = "The engine's per-node search (cold step) is as fast as plain enumeration or faster"
        return [f"{head} on all {len(compared)} rows compared."]
    text = f"The engine's per-node search (cold step) is NOT faster than plain enumeration on {', '.join(slower)}"
    text += f"; it is faster on {', '.join(faster)}" if faster else ""
    if beyond:
        worst = max(f.step_cold_ms for f in beyond)
        text += f"; where enumeration was not run (too many sets) it finished within {worst:.0f} ms"
    return [text + "."]


def search_markdown(search: Sequence[SearchFigure]) -> list[str]:
    """The search section (lines of the report), or nothing when the run did not measure it."""
    if not search:
        return []
    table = markdown_table(
        ["topology", "devices", "k", "decision ms", "step cold ms", "step warm ms", "exhaustive ms", "sets", "same"],
        [
            [
                s.topology,
                str(s.devices),
                str(s.request),
                f"{s.search_ms:.3f}",
                f"{s.step_cold_ms:.3f}",
                f"{s.step_warm_ms:.3f}",
                f"{s.exhaustive_ms:.3f}" if s.exhaustive_ms is not None else "not run",
                str(s.sets),
                str(s.same_answer),
            ]
            for s in search
        ],
    )
    legend = (
        "decision: the engine's whole per-node decision (its first on a fresh engine in the short profile); "
        "step: the NVIDIA search step alone (pair table + search), cold (tables built afresh, median) and warm; "
        "exhaustive: pair table + every C(free, k) set by the same key (median). Step cold vs exhaustive is the "
        "like-for-like comparison."
    )
    return ["## Per-node device search vs exhaustive enumeration", "", legend, "", table, ""]
