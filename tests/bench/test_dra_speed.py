"""The DRA section of the benchmark: its cases allocate, its figures are named, and the case with no
solution ends at the search's bound with the error that says so."""

from __future__ import annotations

from bench import dra_speed
from engine.node.dra import CelPrograms, allocate


def test_the_gpus8_case_gets_eight_gpus_of_the_one_clique_left_free() -> None:
    claim, given, score = dra_speed.gpus8_case()
    (result,) = allocate(dra_speed.NODE, [claim], given, CelPrograms(), score=score) or ()
    assert sorted(r.device for r in result.devices.results) == sorted(f"gpu-{i}" for i in range(64, 72))


def test_the_mig4_case_puts_each_partition_on_its_own_gpu() -> None:
    claim, given = dra_speed.mig4_case()
    (result,) = allocate(dra_speed.NODE, [claim], given, CelPrograms()) or ()
    parents = [r.device.rsplit("-", 2)[0] for r in result.devices.results]
    assert len(parents) == 4 and len(set(parents)) == 4


def test_the_section_reports_each_case_against_its_baselines_and_the_bound_error() -> None:
    timings = dra_speed.run(rounds=10)
    figures = {f.name: f for f in dra_speed.figures(timings)}
    assert set(figures) == {"dra.gpus8.p99_ms", "dra.mig4.p99_ms", "dra.no_solution.ms"}
    assert set(figures["dra.gpus8.p99_ms"].baselines) == {"upstream_first_solution", "cold_selectors"}
    assert "allocation search aborted after 20000 steps without a solution" in figures["dra.no_solution.ms"].detail
    assert "| gpus8 |" in dra_speed.markdown(timings)
