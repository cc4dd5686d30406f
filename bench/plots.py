"""PNG plots of a run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bench.device_replay import DevicePolicyResult  # noqa: E402
from bench.engine_speed import SpeedRun  # noqa: E402
from bench.report.device_section import device_stats  # noqa: E402
from bench.trace_replay import ReplayResult  # noqa: E402


def _finish(fig: Figure, path: Path, machine: str) -> Path:
    fig.text(0.99, 0.005, machine, ha="right", va="bottom", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def fragmentation_curve(
    replays: Mapping[str, Sequence[ReplayResult]], published: Mapping[str, float], path: Path, machine: str
) -> Path:
    """Unallocated GPU over the replay (first seed of each policy); labelled variants (`<policy>/...`) dashed."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    bases = [p for p in replays if "/" not in p]
    color_of = {p: colors[i % len(colors)] for i, p in enumerate(bases)}
    for policy, runs in replays.items():
        base = policy.split("/")[0]
        color = color_of.get(base, "0.3")
        curve = [p for p in runs[0].curve if p.arrived_pct >= 60.0]
        ax.plot(
            [p.arrived_pct for p in curve],
            [p.unallocated_pct for p in curve],
            label=policy,
            color=color,
            linestyle="--" if "/" in policy else "-",
            linewidth=2.2 if policy.startswith("topoplace") else 1.4,
        )
        if policy in published:
            ax.plot(
                [100], [published[policy]], marker="x", color=color, markersize=10, markeredgewidth=2, linestyle="none"
            )
    ax.axvline(100, color="0.6", linestyle=":", linewidth=1)
    ax.set_xlim(60, max(p.arrived_pct for runs in replays.values() for p in runs[0].curve) + 1)
    ax.set_ylim(0, 42)
    ax.set_xlabel("arrived GPU demand, % of cluster GPU capacity")
    ax.set_ylabel("unallocated GPU, % of capacity")
    ax.set_title(
        "Alibaba GPU trace v2023, 1,213 GPU nodes: unallocated GPU as demand arrives (seed 0)\n"
        "x = published mean at 100 % (Weng et al., ATC'23); dashed = our earlier replay's variants"
    )
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    ax.grid(alpha=0.3)
    return _finish(fig, path, machine)


def quality_vs_baseline(results: Sequence[DevicePolicyResult], path: Path, machine: str) -> Path:
    names = [r.policy for r in results]
    stats = [device_stats(r) for r in results]  # the figures of results.json, so plot and table agree
    mean_q = [s["link_quality_mean_pct"] for s in stats]
    optimal = [s["optimal_decisions_pct"] for s in stats]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    x = np.arange(len(names))
    ax1.bar(x - 0.2, mean_q, width=0.4, label="mean link score vs optimum")
    ax1.bar(x + 0.2, optimal, width=0.4, label="decisions at the optimum")
    ax1.set_xticks(x, names, rotation=20, ha="right")
    ax1.set_ylabel("%")
    ax1.set_ylim(min(50.0, min(mean_q + optimal) - 5), 101)
    ax1.set_title("multi-device decisions (100 % = exhaustive optimum)")
    ax1.legend(fontsize=8, loc="lower left")
    for xi, v in zip(x, mean_q, strict=True):
        ax1.text(xi - 0.2, v + 0.3, f"{v:.1f}", ha="center", fontsize=7)
    ax2.bar(x - 0.2, [r.clean_sets_8 for r in results], width=0.4, label="8-device jobs")
    ax2.bar(x + 0.2, [r.clean_sets_4 for r in results], width=0.4, label="4-device jobs")
    ax2.set_xticks(x, names, rotation=20, ha="right")
    ax2.set_title("jobs that still fit on a clean best-link set after the replay")
    ax2.legend(fontsize=8)
    return _finish(fig, path, machine)


def latency_histogram(runs: Sequence[SpeedRun], path: Path, machine: str) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        data = np.array(run.latencies_ms)
        bins = np.logspace(np.log10(max(data.min(), 1e-3)), np.log10(data.max() * 1.01), 30)
        ax.hist(
            data,
            bins=list(bins),
            alpha=0.6,
            label=f"{run.nodes} nodes, {run.mode} "
            f"(p50 {run.percentile_ms(50):.2f} ms, p99 {run.percentile_ms(99):.2f} ms)",
        )
    ax.set_xscale("log")
    ax.set_xlabel("engine time per decision, ms (log)")
    ax.set_ylabel("decisions")
    ax.set_title("engine latency per decision (whole-snapshot place())")
    ax.legend(fontsize=8)
    return _finish(fig, path, machine)


def decisions_per_second(runs: Sequence[SpeedRun], path: Path, machine: str) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode in sorted({r.mode for r in runs}):
        chosen = sorted((r for r in runs if r.mode == mode), key=lambda r: r.nodes)
        ax.plot([r.nodes for r in chosen], [r.decisions_per_s for r in chosen], marker="o", label=f"topoplace {mode}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes in the snapshot")
    ax.set_ylabel("decisions per second (one core)")
    ax.set_title("engine throughput vs cluster size")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return _finish(fig, path, machine)
