"""results.json shape: every figure has a documented name, a value (or why not), a unit and baselines."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import msgspec

from bench.device_replay import DEVICE_POLICIES, build_cluster, run_policy, workload
from bench.engine_speed import measure
from bench.fragmentation import typical_classes
from bench.report import build_figures, build_markdown, build_notes, second_list_figures
from bench.results import Machine, Results, load_results, output_dirs, write_results
from bench.trace_policies import BestFit, Fgd
from bench.trace_replay import replay
from engine import Mode
from tests.bench.helpers import node, pod

README = Path(__file__).resolve().parents[2] / "bench" / "README.md"


def tiny_run() -> tuple[Results, str]:
    nodes = [node(f"n{i}", gpus=4) for i in range(3)]
    pods = [pod("a", 1, 500), pod("b", 2, 1000), pod("c", 1, 1000)]
    classes = typical_classes(pods)
    trace = {p.name: [replay(nodes, pods, p, classes, seed=0)] for p in (BestFit, Fgd)}
    cluster_nodes, _ = build_cluster(1)
    jobs = workload(cluster_nodes, 20, seed=0)
    device = [run_policy(name, DEVICE_POLICIES[name], jobs, 1, 0) for name in ("topoplace", "first-fit")]
    speed = [measure(2, 4, Mode.DEFAULT), measure(2, 4, Mode.HAMI)]
    figures = build_figures(trace, device, speed, [], [None, None])
    results = Results(
        generated_at="2026-01-01T00:00:00+00:00",
        profile="test",
        command="python -m bench.run",
        machine=Machine.here(),
        inputs={"nodes": "n.csv", "pods": "p.csv"},
        figures=tuple(figures),
        notes=tuple(build_notes(trace, device, speed)),
    )
    return results, build_markdown(results, trace, device, speed, [])


def test_results_json_round_trips_and_every_figure_is_well_formed(tmp_path):
    results, markdown = tiny_run()
    run_dir, latest = output_dirs(tmp_path, dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    assert run_dir.name == "2026-01-02"
    write_results(results, markdown, {}, run_dir, latest)
    loaded = load_results(latest / "results.json")
    assert loaded == results
    raw = msgspec.json.decode((run_dir / "results.json").read_bytes())
    assert set(raw) >= {"generated_at", "profile", "command", "machine", "figures"}
    names = [f.name for f in loaded.figures]
    assert len(names) == len(set(names))
    for figure in loaded.figures:
        assert figure.unit
        assert figure.value is not None or figure.detail  # a missing figure says why
    assert (
        "trace.unallocated_gpu_pct.fgd" in names
        and "best-fit" in next(f for f in loaded.figures if f.name == "trace.unallocated_gpu_pct.fgd").baselines
    )
    assert (latest / "results.md").read_text().startswith("# topoplace benchmark")
    by_name = {f.name: f for f in loaded.figures}
    for policy in ("fgd", "best-fit"):
        assert by_name[f"trace.link_quality_mean_pct.{policy}"].value is not None
        assert by_name[f"trace.link_optimal_sets_pct.{policy}"].unit == "% of multi-GPU pods"
        assert by_name[f"trace.ms_per_decision.{policy}"].value is not None


def test_every_figure_family_is_documented_in_the_readme():
    results, _ = tiny_run()
    documented = README.read_text()
    nodes, pods = [node("n", gpus=4)], [pod("a", 2, 1000), pod("b", 1, 300)]
    second = {p.name: [replay(nodes, pods, p, typical_classes(pods), seed=0)] for p in (BestFit, Fgd)}
    extra = second_list_figures("trace_multigpu20", second)
    assert {f.name for f in extra} >= {"trace_multigpu20.unallocated_gpu_pct.fgd"}
    assert "best-fit" in next(f for f in extra if f.name == "trace_multigpu20.unallocated_gpu_pct.fgd").baselines
    for figure in (*results.figures, *extra):
        prefix = ".".join(figure.name.split(".")[:2])
        assert f"`{prefix}" in documented, f"{figure.name}: family {prefix} not documented in bench/README.md"


def _replay_result(policy: str, unallocated: float):
    from bench.trace_replay import ReplayResult

    return ReplayResult(
        policy=policy,
        seed=0,
        unallocated_pct=unallocated,
        fragmented_pct=unallocated,
        pods_arrived=10,
        pods_dropped=1,
        seconds=0.1,
        decisions=9,
        curve=(),
    )


def test_notes_say_plainly_where_topoplace_is_behind_and_where_search_is_slower():
    from bench.search_speed import SearchFigure

    trace = {
        "fgd": [_replay_result("fgd", 7.0)],
        "topoplace": [_replay_result("topoplace", 9.0)],
        "random-fit": [_replay_result("random-fit", 13.4)],
    }
    search = [
        SearchFigure(
            topology="small (8)",
            devices=8,
            request=2,
            search_ms=1.0,
            expanded=1,
            exact=True,
            sets=28,
            exhaustive_ms=0.5,
            same_answer=True,
            step_cold_ms=0.6,  # the cold step is what is compared with the enumeration
        ),
        SearchFigure(
            topology="mid (16)",
            devices=16,
            request=4,
            search_ms=2.0,  # the whole decision may be slower: not the like-for-like figure
            expanded=1,
            exact=True,
            sets=715,
            exhaustive_ms=0.9,
            same_answer=True,
            step_cold_ms=0.3,
        ),
        SearchFigure(
            topology="big (72)",
            devices=72,
            request=8,
            search_ms=30.0,
            expanded=9,
            exact=True,
            sets=10**9,
            step_cold_ms=29.0,
        ),  # fmt: skip
    ]
    notes = build_notes(trace, [], [], search)
    behind = next(n for n in notes if n.startswith("topoplace is NOT ahead on fragmentation"))
    assert "fgd (7.00 %)" in behind and "ahead of random-fit" in behind
    assert any(n.startswith("fgd: ours 7.00 %") and "DIFFERS from the published 4.77 %" in n for n in notes)
    assert any(n.startswith("random-fit: ours 13.40 %") and "reproduces the published 13.70 %" in n for n in notes)
    slower = next(n for n in notes if "NOT faster than plain enumeration" in n)
    assert "small k=2" in slower and "within 29 ms" in slower
    assert "faster on mid k=4" in slower


def test_search_note_says_so_when_the_search_is_never_slower():
    from bench.report.speed_section import search_notes
    from bench.search_speed import SearchFigure

    row = SearchFigure(
        topology="small (8)", devices=8, request=2, search_ms=1.0, expanded=1, exact=True, sets=28,
        exhaustive_ms=0.5, same_answer=True, step_cold_ms=0.4,
    )  # fmt: skip
    assert search_notes([row]) == [
        "The engine's per-node search (cold step) is as fast as plain enumeration or faster on all 1 rows compared."
    ]
