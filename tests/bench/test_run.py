"""The run: its sections measured in the table's order, and a section registered after the built-in ones
reported in results.json and results.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import run as bench_run
from bench.device_replay import DEVICE_POLICIES, build_cluster, run_policy, workload
from bench.engine_speed import measure
from bench.fragmentation import typical_classes
from bench.pipeline_speed import PipelineRun
from bench.results import Figure, SectionReport, load_results
from bench.sections import BenchRun, Section
from bench.trace_policies import BestFit, Fgd
from bench.trace_replay import replay
from engine import Mode
from tests.bench.helpers import node, pod

PLOTS = {"fragmentation_curve.png", "quality_vs_baseline.png", "latency_histogram.png", "decisions_per_s.png"}


def _tiny_sections(order: list[str]) -> tuple[Section, ...]:
    """The built-in sections' results from tiny inputs, then a section of another kind."""

    def trace(run: BenchRun) -> None:
        order.append("trace")
        nodes, pods = [node(f"n{i}", gpus=4) for i in range(3)], [pod("a", 1, 500), pod("b", 2, 1000)]
        run.trace = {p.name: [replay(nodes, pods, p, typical_classes(pods), seed=0)] for p in (BestFit, Fgd)}
        run.multigpu = {"fgd": run.trace["fgd"]}

    def device_and_speed(run: BenchRun) -> None:
        order.append("device and speed")
        jobs = workload(build_cluster(1)[0], 20, seed=0)
        run.device = [run_policy(name, DEVICE_POLICIES[name], jobs, 1, 0) for name in ("topoplace", "first-fit")]
        run.speed = [measure(2, 4, Mode.DEFAULT), measure(2, 4, Mode.HAMI)]
        run.pipeline = [PipelineRun(placers=p, error="not started") for p in (1, 2)]

    def vendor_fragmentation(run: BenchRun) -> None:
        order.append("vendor fragmentation")
        figure = Figure(name="vendor.fragmentation_pct.metax", value=1.5, unit="%")
        run.extra.append(
            SectionReport(title="Vendor fragmentation", figures=(figure,), notes=("metax: 1.5 %.",), markdown="| x |")
        )

    return (trace, device_and_speed, vendor_fragmentation)


def test_sections_run_in_the_tables_order_and_a_registered_section_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    monkeypatch.setattr(bench_run, "SECTIONS", _tiny_sections(order))
    assert bench_run.main(["--out", str(tmp_path), "--seeds", "1"]) == 0
    assert order == ["trace", "device and speed", "vendor fragmentation"]
    latest = tmp_path / "latest"
    assert {p.name for p in latest.iterdir()} == {"results.json", "results.md", *PLOTS}
    results = load_results(latest / "results.json")
    names = [f.name for f in results.figures]
    assert names[0] == "trace.unallocated_gpu_pct.best-fit" and names[-1] == "vendor.fragmentation_pct.metax"
    assert "trace_multigpu20.unallocated_gpu_pct.fgd" in names and "pipeline.not_measured.placers2" in names
    assert results.notes[-1] == "metax: 1.5 %."
    assert results.command == "python -m bench.run --profile short --seeds 1"
    markdown = (latest / "results.md").read_text()
    assert markdown.index("## Scale") < markdown.index("## Vendor fragmentation\n\n| x |") < markdown.index("## Notes")
    assert markdown.endswith("- metax: 1.5 %.\n")
