"""The preemption section: its figures on small clusters, the fast search's answers those of every node."""

from __future__ import annotations

from bench import preempt_speed
from bench.preempt_clusters import cpu_cluster, cpu_preemptor, gpu_cluster, gpu_preemptor


def test_the_section_reports_speed_against_every_node_and_victims_against_exhaustive_search() -> None:
    runs = (
        ("cpu_60", lambda: cpu_cluster(60), cpu_preemptor, 6, 3),
        ("gpu_20", lambda: gpu_cluster(20), gpu_preemptor, 8, 4),
    )
    report = preempt_speed.run(lambda _: None, runs=runs, small=30, gang=(256, 8, 1))
    figures = {f.name: f for f in report.figures}
    assert set(figures) == {
        "preempt.cpu_60.warm_p99_ms",
        "preempt.cpu_60.cold_ms",
        "preempt.gpu_20.warm_p99_ms",
        "preempt.gpu_20.cold_ms",
        "preempt.cpu_60.new_preemptor_p99_ms",
        "preempt.gpu_20.new_preemptor_p99_ms",
        "preempt.small.same_cost_as_every_node",
        "preempt.small.same_top_priority_as_subsets",
        "preempt.gang_8x8_256.cold_ms",
        "preempt.gang_8x8_256.warm_max_ms",
    }
    assert "domain leaf-" in figures["preempt.gang_8x8_256.cold_ms"].detail  # eight members fit one leaf
    assert "every_node_p99" in figures["preempt.cpu_60.warm_p99_ms"].baselines
    assert "differing: 0" in figures["preempt.gpu_20.warm_p99_ms"].detail
    assert figures["preempt.small.same_cost_as_every_node"].value == 30
    preempted = figures["preempt.small.same_top_priority_as_subsets"].baselines["preempted"]
    assert preempted > 0
    assert figures["preempt.small.same_top_priority_as_subsets"].value == preempted
    assert "| cpu_60 |" in report.markdown


def test_packed_clusters_leave_nothing_free() -> None:
    cluster = gpu_cluster(5)
    for node in cluster.snapshot.nodes:
        assert sorted(a.index for a in node.allocations) == list(range(8))
    holders = {a.pod_uid for n in cluster.snapshot.nodes for a in n.allocations}
    assert holders == {p.holder for p in cluster.running}
