"""The scale section of the benchmark: one decision at 1,000 and 10,000 realistic nodes, a 64-pod gang on
10,000 nodes under 10,000 hypernodes, and the placer's memory; as figures and a Markdown section."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

import msgspec

from bench import decision_scale, gang_scale, placer_memory
from bench.decision_scale import DecisionScaleRun, ScaleSettings
from bench.gang_scale import GangScaleRun, GangSettings
from bench.placer_memory import MemoryRun
from bench.results import Figure
from topoplace.gc_tuning import collector_as_the_placer_runs_it, freeze_long_lived

DECISION_GOAL_MS = {1_000: 1.0, 10_000: 5.0}
GANG_GOAL_MS = 100.0
RSS_GOAL_MB = 200.0


class ScaleProfile(msgspec.Struct, frozen=True, kw_only=True):
    decisions: tuple[ScaleSettings, ...]
    gang: GangSettings | None
    memory: tuple[int, int] | None  # (nodes, pods)


class ScaleResults(msgspec.Struct, frozen=True, kw_only=True):
    decisions: tuple[DecisionScaleRun, ...] = ()
    gang: GangScaleRun | None = None
    memory: MemoryRun | None = None
    memory_error: str = ""


SHORT = ScaleProfile(
    decisions=(
        ScaleSettings(nodes=1_000, warm=400, cold=10, reference_every=4, reference_cold=3),
        ScaleSettings(nodes=10_000, warm=300, cold=3, reference_every=100, reference_cold=1),
    ),
    gang=GangSettings(nodes=10_000, warm=50, cold=2, volcano=1),
    memory=(10_000, 100_000),
)
FULL = ScaleProfile(
    decisions=(
        ScaleSettings(nodes=1_000, warm=2_000, cold=30, reference_every=1, reference_cold=10),
        ScaleSettings(nodes=10_000, warm=1_000, cold=10, reference_every=25, reference_cold=3),
    ),
    gang=GangSettings(nodes=10_000, warm=60, cold=5, volcano=3),
    memory=(10_000, 100_000),
)


def run(profile: ScaleProfile, log: Callable[[str], None]) -> ScaleResults:
    """Decisions and gangs with the collector as the placer runs it (topoplace/gc_tuning.py): its thresholds,
    and the long-lived index frozen once built."""
    with collector_as_the_placer_runs_it():
        decisions, gang = _decisions_and_gang(profile, log)
    memory, error = None, ""
    if profile.memory is not None:
        try:
            memory = placer_memory.measure(*profile.memory)
            log(f"placer memory: peak RSS {memory.peak_rss_mb:.0f} MB ({memory.seconds:.0f} s)")
        except Exception as exc:  # a failed subprocess is reported as a missing figure, not a lost run
            error = f"{type(exc).__name__}: {exc}"
            log(f"placer memory not measured: {error}")
    return ScaleResults(decisions=tuple(decisions), gang=gang, memory=memory, memory_error=error)


def _decisions_and_gang(
    profile: ScaleProfile, log: Callable[[str], None]
) -> tuple[list[DecisionScaleRun], GangScaleRun | None]:
    decisions = []
    for settings in profile.decisions:
        result = decision_scale.measure(settings, settle=freeze_long_lived)
        log(
            f"decision at {settings.nodes} nodes: warm p99 {_f(result.p99('warm_ms'))} ms, cold p99 "
            f"{_f(result.p99('cold_ms'))} ms, reference p99 {_f(result.p99('reference_ms'))} ms, "
            f"{result.compared} compared, {len(result.mismatches)} differ"
        )
        decisions.append(result)
    gang = None
    if profile.gang is not None:
        gang = gang_scale.measure(profile.gang, settle=freeze_long_lived)
        log(
            f"gang of {gang.pods} on {gang.nodes} nodes: warm p99 {_f(gang.p99('warm_ms'))} ms, p99.9 "
            f"{_f(gang.p999('warm_ms'))} ms, cold p99 {_f(gang.p99('cold_ms'))} ms, Volcano-style p99 "
            f"{_f(gang.p99('volcano_ms'))} ms"
        )
    return decisions, gang


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _baselines(values: dict[str, float | None]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in values.items() if v is not None}


def figures(results: ScaleResults) -> list[Figure]:
    out: list[Figure] = []
    for run in results.decisions:
        goal = DECISION_GOAL_MS.get(run.nodes)
        out.append(
            Figure(
                name=f"engine.decision_p99_ms.{run.nodes}",
                value=_r(run.p99("warm_ms")),
                unit="ms",
                baselines=_baselines(
                    {
                        "cold": run.p99("cold_ms"),
                        "reference": run.p99("reference_ms"),
                        "reference cold": run.p99("reference_cold_ms"),
                        "index build cold": run.p99("index_build_ms"),
                        **({"goal": goal} if goal is not None else {}),
                    }
                ),
                detail=(
                    f"warm stream of {len(run.warm_ms)} decisions (p50 {_f(run.p50('warm_ms'))} ms), "
                    f"{len(run.cold_ms)} cold, reference on {len(run.reference_ms)} of the warm states "
                    f"(p50 {_f(run.p50('reference_ms'))} ms) and {len(run.reference_cold_ms)} cold; "
                    f"{run.classes} device classes; {run.compared} answers compared with the reference, "
                    f"{len(run.mismatches)} differ"
                ),
            )
        )
    gang = results.gang
    if gang is not None:
        out.append(
            Figure(
                name=f"engine.gang_p99_ms.{gang.nodes}",
                value=_r(gang.p99("warm_ms")),
                unit="ms",
                baselines=_baselines(
                    {
                        "p99.9": gang.p999("warm_ms"),
                        "volcano gradient search": gang.p99("volcano_ms"),
                        "cold": gang.p99("cold_ms"),
                        "tree build": gang.tree_build_ms,
                        "goal": GANG_GOAL_MS,
                    }
                ),
                detail=(
                    f"{gang.pods} pods x 8 GPUs, {gang.hypernodes} hypernodes in {gang.tiers} tiers; "
                    f"{len(gang.warm_ms)} warm gangs ({gang.placed} placed, tiers {list(gang.tiers_used)}), "
                    f"{len(gang.cold_ms)} cold; collector as the placer runs it (index frozen once built); "
                    f"Volcano-style search on {len(gang.volcano_ms)} of the same states "
                    f"(tiers {list(gang.volcano_tiers)}, {gang.volcano_hypernodes_tried} hypernodes dry-run)"
                ),
            )
        )
    out += _memory_figures(results)
    return out


def _memory_figures(results: ScaleResults) -> list[Figure]:
    """The placer's peak RSS at 10,000 nodes, or why it was not measured."""
    out: list[Figure] = []
    if results.memory is not None:
        m = results.memory
        out.append(
            Figure(
                name=f"placer.rss_mb.{m.nodes}",
                value=m.peak_rss_mb,
                unit="MB",
                baselines={
                    "after imports": m.rss_after_imports_mb,
                    "after nodes": m.rss_after_nodes_mb,
                    "at the end": m.rss_end_mb,
                    "goal": RSS_GOAL_MB,
                },
                detail=(
                    f"peak RSS of a ClusterView process: {m.nodes} nodes, {m.pods} pods placed, bound and deleted "
                    f"in {m.seconds:.0f} s; at the end {m.index_nodes} nodes indexed, {m.pods_known_end} pods "
                    f"tracked, {m.deleted_remembered} deleted uids remembered"
                ),
            )
        )
    elif results.memory_error:
        out.append(
            Figure(
                name="placer.rss_mb.10000",
                value=None,
                unit="MB",
                detail=f"not measured in this run: {results.memory_error}",
            )
        )
    return out


def notes(results: ScaleResults) -> list[str]:
    """Each goal met or not, said plainly, with the baseline beside it."""
    out = []
    for figure in figures(results):
        goal = figure.baselines.get("goal")
        if goal is None or figure.value is None:
            continue
        others = ", ".join(f"{k} {v:g}" for k, v in figure.baselines.items() if k != "goal")
        verdict = "within" if figure.value <= goal else "NOT within"
        out.append(f"{figure.name} = {figure.value:g} {figure.unit}: {verdict} its goal of {goal:g} ({others}).")
    for run in results.decisions:
        if run.mismatches:
            out.append(f"At {run.nodes} nodes the index and the reference loop differ: {'; '.join(run.mismatches)}.")
    return out


def markdown(results: ScaleResults) -> str:
    lines = [
        "Decisions on realistic nodes (unique names, labels, GPU UUIDs and loads); "
        "p50 / p99 in ms; the reference is the per-node loop on the same states.",
        "",
        _table(
            [
                "nodes",
                "classes",
                "warm p50",
                "warm p99",
                "cold p99",
                "index build",
                "reference p99",
                "reference cold",
                "goal p99",
                "compared / differ",
            ],  # fmt: skip
            [
                [
                    str(r.nodes),
                    str(r.classes),
                    _f(r.p50("warm_ms")),
                    _f(r.p99("warm_ms")),
                    _f(r.p99("cold_ms")),
                    _f(r.p99("index_build_ms")),
                    _f(r.p99("reference_ms")),
                    _f(r.p99("reference_cold_ms")),
                    _f(DECISION_GOAL_MS.get(r.nodes)),
                    f"{r.compared} / {len(r.mismatches)}",
                ]
                for r in results.decisions
            ],
        ),
    ]
    for r in results.decisions:
        lines += [f"- {r.nodes} nodes, differs from the reference: {m}" for m in r.mismatches]
    gang = results.gang
    if gang is not None:
        lines += [
            "",
            f"Gang of {gang.pods} pods x 8 GPUs on {gang.nodes} nodes, {gang.hypernodes} hypernodes in {gang.tiers} "
            f"tiers (tree built in {gang.tree_build_ms:.0f} ms, outside the timing):",
            "",
            _table(
                ["", "runs", "p99 ms", "tiers chosen"],
                [
                    ["place_gang warm", str(len(gang.warm_ms)), _f(gang.p99("warm_ms")), str(list(gang.tiers_used))],
                    ["place_gang cold", str(len(gang.cold_ms)), _f(gang.p99("cold_ms")), ""],
                    [
                        "Volcano-style gradient search",
                        str(len(gang.volcano_ms)),
                        _f(gang.p99("volcano_ms")),
                        str(list(gang.volcano_tiers)),
                    ],
                ],
            ),
        ]
    if results.memory is not None:
        m = results.memory
        lines += [
            "",
            f"Placer memory: peak RSS {m.peak_rss_mb:.0f} MB holding {m.nodes} nodes after {m.pods} pods came and "
            f"went (after imports {m.rss_after_imports_mb:.0f} MB, after the nodes {m.rss_after_nodes_mb:.0f} MB, "
            f"at the end {m.rss_end_mb:.0f} MB; goal {RSS_GOAL_MB:.0f} MB).",
        ]
    elif results.memory_error:
        lines += ["", f"Placer memory: not measured ({results.memory_error})."]
    return "\n".join(lines)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


PROFILES = {"short": SHORT, "full": FULL}


def main(argv: Sequence[str] | None = None) -> int:
    """This section alone (nothing written): its figures as JSON lines, then its Markdown."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="short")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    results = run(PROFILES[args.profile], log)
    for figure in figures(results):
        print(msgspec.json.encode(figure).decode())
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
