"""One command for the whole benchmark: `python -m bench.run [--profile short|full]`.

Writes bench/results/<UTC date>/ and bench/results/latest/: results.json (every
figure with the baselines' values from the same run), results.md (tables) and
PNG plots. Sections: the Alibaba trace replay (fragmentation, FGD protocol),
device-level link quality on synthetic fixture clusters, engine speed, per-node
search speed, pipeline speed (through the broker; see pipeline_speed/), and scale (one decision at
1,000 / 10,000 realistic nodes, a 64-pod gang under 10,000 hypernodes, the placer's memory; see scale.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from bench import sections
from bench.profiles import PROFILES, Profile
from bench.report.run_report import run_figures, run_markdown, run_notes, write_plots
from bench.results import Machine, Results, output_dirs, write_results
from bench.sections import BenchRun, Section, TraceFiles, log

HERE = Path(__file__).resolve().parent
DEFAULT_NODES = HERE / "data" / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
DEFAULT_PODS = HERE / "data" / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"
MULTIGPU_PODS = HERE / "data" / "alibaba-gpu-v2023" / "openb_pod_list_multigpu20.csv"

# The sections, measured in this order: one line each (the steps are in bench/sections.py).
SECTIONS: tuple[Section, ...] = (
    sections.replay_trace,
    sections.replay_multigpu_trace,
    sections.measure_device_quality,
    sections.measure_engine_speed,
    sections.measure_search_speed,
    sections.measure_pipeline_speed,
    sections.measure_scale,
    sections.measure_vendor_fragmentation,
    sections.measure_pod_topology,
    sections.measure_preemption,
    sections.measure_dra_speed,
)


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Profile]:
    """The command line, and the profile it asks for (with `--seeds` applied)."""
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="short")
    parser.add_argument("--nodes", type=Path, default=DEFAULT_NODES, help="node list CSV (Alibaba v2023 format)")
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS, help="pod list CSV (Alibaba v2023 format)")
    parser.add_argument(
        "--multigpu-pods",
        type=Path,
        default=MULTIGPU_PODS,
        help="second pod list, replayed for fgd and topoplace-frag only (figures trace_multigpu20.*)",
    )
    parser.add_argument(
        "--out", type=Path, default=HERE / "results", help="results root (a dated folder and latest/ go here)"
    )
    parser.add_argument("--seeds", type=int, default=None, help="override the profile's number of trace seeds")
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    if args.seeds is not None:
        if args.seeds < 1:
            parser.error("--seeds: must be at least 1")
        profile = msgspec.structs.replace(profile, trace_seeds=tuple(range(args.seeds)))
    return args, profile


def main(argv: Sequence[str] | None = None) -> int:
    args, profile = parse_args(argv)
    machine = Machine.here()
    now = dt.datetime.now(dt.UTC)
    run_dir, latest_dir = output_dirs(args.out, now)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    run = BenchRun(
        profile=profile,
        trace_files=TraceFiles(nodes=args.nodes, pods=args.pods, multigpu_pods=args.multigpu_pods),
    )
    for section in SECTIONS:
        section(run)

    figures = run_figures(run)
    results = Results(
        generated_at=now.isoformat(timespec="seconds"),
        profile=profile.name,
        command=f"python -m bench.run --profile {profile.name}" + (f" --seeds {args.seeds}" if args.seeds else ""),
        machine=machine,
        inputs={
            "nodes": args.nodes.name,
            "pods": args.pods.name,
            "multigpu_pods": args.multigpu_pods.name,
            "seconds": f"{time.perf_counter() - started:.0f}",
        },
        figures=tuple(figures),
        notes=tuple(run_notes(run, figures)),
    )
    plot_paths = write_plots(run, run_dir, machine.label())
    write_results(results, run_markdown(results, run), plot_paths, run_dir, latest_dir)
    log(f"wrote {run_dir} and {latest_dir} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
