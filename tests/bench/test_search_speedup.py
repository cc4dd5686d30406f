"""The search speed-up figures: enumeration time over the warm search step, per node size."""

from __future__ import annotations

from bench.search_speed import SearchFigure, speedup_figures


def _row(devices: int, k: int, enumeration: float | None, warm: float) -> SearchFigure:
    return SearchFigure(
        topology=f"t{devices}", devices=devices, request=k, search_ms=1.0, expanded=0, exact=True, sets=10,
        step_cold_ms=2 * warm, step_warm_ms=warm, enumeration_ms=enumeration,
    )  # fmt: skip


def test_speedup_is_taken_at_the_largest_request_and_per_request() -> None:
    figures = {
        f.name: f for f in speedup_figures([_row(16, 2, 1.0, 0.5), _row(16, 8, 30.0, 0.1), _row(72, 8, None, 0.4)])
    }
    assert figures["search.speedup_vs_exhaustive.16"].value == 300.0
    assert figures["search.speedup_vs_exhaustive.16"].baselines == {"cold.k8": 150.0}
    assert figures["search.speedup_vs_exhaustive.16.k2"].value == 2.0
    assert "search.speedup_vs_exhaustive.72" not in figures  # enumeration not run there
    assert figures["search.step_warm_ms.t72.72dev.k8"].value == 0.4
