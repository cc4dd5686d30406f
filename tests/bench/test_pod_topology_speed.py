"""Section 8: pods with anti-affinity and spread constraints, timed beside every node asked."""

from __future__ import annotations

from pathlib import Path

from bench import pod_topology_speed as pts
from bench.run import SECTIONS
from bench.sections import measure_pod_topology
from engine import Engine, Mode

README = Path(__file__).resolve().parents[2] / "bench" / "README.md"


def test_a_small_run_gives_the_references_answers_and_every_figure() -> None:
    run = pts.measure(pts.TopologySettings(nodes=60, warm=25, cold=1, reference_every=1))
    assert run.compared == 25
    assert run.mismatches == ()
    assert run.running_pods == 600
    assert len(run.warm_ms) == len(run.warm_cpu_ms) == 25 and len(run.cold_ms) == 1
    assert set(run.warm_kinds) == set(pts.KINDS)
    figures = {f.name: f for f in pts.figures(run)}
    assert set(figures) == {
        "pod_topology.warm_p99_ms",
        "pod_topology.warm_cpu_p99_ms",
        "pod_topology.warm_p50_ms",
        "pod_topology.cold_p99_ms",
        "pod_topology.reference_ratio",
        "pod_topology.mismatches",
    }
    assert figures["pod_topology.warm_p99_ms"].baselines["goal"] == pts.GOAL_P99_MS
    assert figures["pod_topology.mismatches"].value == 0.0
    text = README.read_text()
    assert all(f"`{name}`" in text for name in figures)
    assert "| gpu-spread |" in pts.markdown(run)


def test_the_reference_sees_a_spread_pod_move_off_the_crowded_nodes() -> None:
    cluster = pts.cluster(30, seed=1)
    engine = Engine()
    index = engine.new_index()
    for node in cluster:
        index.upsert(node)
    app = cluster[0].running[0].labels["app"]  # a workload with a replica on the first node
    pod = pts.stream_pod("p", "cpu-spread", workload=int(app.removeprefix("app-")))
    decision = engine.place_in(index, pod, Mode.DEFAULT)
    assert (decision.node, round(decision.score, 6)) == pts.reference_answer(engine._parts, index, pod)
    crowded = {n.name for n in cluster for p in n.running if p.labels.get("app") == app}
    assert cluster[0].name in crowded
    assert decision.node not in crowded


def test_the_section_is_in_the_benchmark() -> None:
    assert measure_pod_topology in SECTIONS
