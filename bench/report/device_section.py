"""Section 2 of the report, device-level link quality on synthetic fixture clusters: figures, notes, tables."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.device_replay import DevicePolicyResult
from bench.report.stats import markdown_table, mean
from bench.results import Figure

DEVICE_UNITS = {
    "link_quality_mean_pct": "% of optimum",
    "link_quality_p10_pct": "% of optimum",
    "optimal_decisions_pct": "%",
    "clean_sets_8": "jobs",
    "clean_sets_4": "jobs",
    "modelled_throughput": "fraction of ideal",
    "unplaced_jobs": "jobs",
    "decision_ms_mean": "ms",
}
HIGHER_IS_BETTER = (
    ("link_quality_mean_pct", "mean link score vs optimum"),
    ("clean_sets_8", "clean 8-device sets left"),
    ("clean_sets_4", "clean 4-device sets left"),
    ("modelled_throughput", "modelled throughput"),
)
LOWER_IS_BETTER = (("unplaced_jobs", "jobs left unplaced"), ("decision_ms_mean", "time per decision (ms)"))


def device_stats(result: DevicePolicyResult) -> dict[str, float]:
    """One policy's figures, keyed as in DEVICE_UNITS (the plot reads them too, so plot and table agree)."""
    q = np.array([d.quality_pct for d in result.decisions]) if result.decisions else np.array([100.0])
    lat = np.array([d.seconds * 1000 for d in result.decisions]) if result.decisions else np.array([0.0])
    return {
        "link_quality_mean_pct": float(q.mean()),
        "link_quality_p10_pct": float(np.percentile(q, 10)),
        "optimal_decisions_pct": float(100.0 * (q >= 99.999).mean()),
        "clean_sets_8": float(result.clean_sets_8),
        "clean_sets_4": float(result.clean_sets_4),
        "modelled_throughput": float(result.modelled_throughput),
        "unplaced_jobs": float(result.unplaced),
        "decision_ms_mean": float(lat.mean()),
    }


def device_figures(device: Sequence[DevicePolicyResult]) -> list[Figure]:
    """`device.<key>.<policy>` against every other policy, then per machine type `...<policy>.<machine>`."""
    figures: list[Figure] = []
    stats = {r.policy: device_stats(r) for r in device}
    for r in device:
        for key, value in stats[r.policy].items():
            figures.append(
                Figure(
                    name=f"device.{key}.{r.policy}",
                    value=round(value, 4),
                    unit=DEVICE_UNITS[key],
                    baselines={p: round(s[key], 4) for p, s in stats.items() if p != r.policy},
                )
            )
        figures += _machine_figures(r, device)
    return figures


def _machine_figures(result: DevicePolicyResult, device: Sequence[DevicePolicyResult]) -> list[Figure]:
    figures = []
    for m in sorted({d.machine_type for d in result.decisions}):
        q = [d.quality_pct for d in result.decisions if d.machine_type == m]
        baselines = {}
        for other in device:
            if other.policy != result.policy:
                oq = [d.quality_pct for d in other.decisions if d.machine_type == m]
                if oq:
                    baselines[other.policy] = round(mean(oq), 4)
        figures.append(
            Figure(
                name=f"device.link_quality_mean_pct.{result.policy}.{m}",
                value=round(mean(q), 4),
                unit="% of optimum",
                baselines=baselines,
                detail=f"{len(q)} multi-device decisions",
            )
        )
    return figures


def device_notes(device: Sequence[DevicePolicyResult]) -> list[str]:
    """Where topoplace leads or ties, and every figure on which another policy is ahead of it."""
    stats = {r.policy: device_stats(r) for r in device}
    if "topoplace" not in stats:
        return []
    own = stats["topoplace"]
    notes = []
    for key, label in HIGHER_IS_BETTER:
        better = [p for p, s in stats.items() if p != "topoplace" and s[key] > own[key] + 1e-9]
        if better:
            others = ", ".join(f"{p} {stats[p][key]:.2f}" for p in better)
            notes.append(f"topoplace is NOT ahead on {label}: {others} vs topoplace {own[key]:.2f}.")
        else:
            notes.append(f"topoplace leads or ties on {label}: {own[key]:.2f}.")
    for key, label in LOWER_IS_BETTER:
        better = [p for p, s in stats.items() if p != "topoplace" and s[key] < own[key] - 1e-9]
        if better:
            others = ", ".join(f"{p} {stats[p][key]:.2f}" for p in better)
            notes.append(f"topoplace is NOT ahead on {label}: {others} vs topoplace {own[key]:.2f}.")
    return notes


def device_markdown(device: Sequence[DevicePolicyResult]) -> list[str]:
    """The policy table, then the mean link score by machine type (lines of the report)."""
    rows = []
    for r in device:
        s = device_stats(r)
        rows.append(
            [
                r.policy,
                f"{s['link_quality_mean_pct']:.1f}",
                f"{s['link_quality_p10_pct']:.1f}",
                f"{s['optimal_decisions_pct']:.1f}",
                f"{r.clean_sets_8}",
                f"{r.clean_sets_4}",
                f"{s['modelled_throughput']:.3f}",
                f"{r.unplaced}",
                f"{s['decision_ms_mean']:.2f}",
            ]
        )
    policies = markdown_table(
        [
            "policy",
            "mean link score % of optimum",
            "p10 %",
            "optimal decisions %",
            "clean 8-sets left",
            "clean 4-sets left",
            "modelled throughput",
            "unplaced jobs",
            "ms/decision",
        ],
        rows,
    )
    by_machine = []
    for m in sorted({d.machine_type for r in device for d in r.decisions}):
        row = [m]
        for r in device:
            q = [d.quality_pct for d in r.decisions if d.machine_type == m]
            row.append(f"{mean(q):.1f} ({len(q)})" if q else "—")
        by_machine.append(row)
    return [
        policies,
        "",
        "Mean link score % of optimum by machine type (decisions):",
        "",
        markdown_table(["machine", *[r.policy for r in device]], by_machine),
    ]
