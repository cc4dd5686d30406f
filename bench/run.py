"""One command for the whole benchmark: `python -m bench.run [--profile short|full]`.

Writes bench/results/<UTC date>/ and bench/results/latest/: results.json (every
figure with the baselines' values from the same run), results.md (tables) and
PNG plots. Sections: the Alibaba trace replay (fragmentation, FGD protocol),
device-level link quality on synthetic fixture clusters, engine speed, per-node
search speed, pipeline speed (through the broker; see pipeline_speed.py), and scale (one decision at
1,000 / 10,000 realistic nodes, a 64-pod gang under 10,000 hypernodes, the placer's memory; see scale.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from bench import pipeline_speed, plots, scale, search_speed, vendor_fragmentation
from bench.device_replay import DevicePolicyResult, run_all
from bench.engine_speed import SpeedRun, measure
from bench.report import build_figures, build_markdown, build_notes, second_list_figures
from bench.results import Machine, Results, output_dirs, write_results
from bench.topoplace_trace import EngineTracePolicy, topoplace_factory
from bench.trace import load_nodes, load_pods
from bench.trace_policies import (
    PAPER_POLICIES,
    PUBLISHED_UNALLOCATED_PCT,
    PolicyFactory,
    RandomFit,
    Resolution,
    Ties,
    variant,
)
from bench.trace_replay import EARLIER, SIMULATOR, ReplayProtocol, ReplayResult, replay
from engine import Mode

HERE = Path(__file__).resolve().parent
DEFAULT_NODES = HERE / "data" / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
DEFAULT_PODS = HERE / "data" / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"
MULTIGPU_PODS = HERE / "data" / "alibaba-gpu-v2023" / "openb_pod_list_multigpu20.csv"
MULTIGPU_POLICIES = ("fgd", EngineTracePolicy.name)  # the second pod list: FGD against our policy only


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    trace_seeds: tuple[int, ...]
    trace_stop_at: float  # replay until this x capacity of arrived demand (the figure is read at 1.0)
    device_per_type: int
    device_jobs: int
    device_seed: int
    speed: tuple[tuple[int, int], ...]  # (nodes, decisions)
    search_quick: bool
    earlier_variants: bool  # also replay every paper policy under our earlier protocol (labelled extras)
    scale: scale.ScaleProfile


PROFILES = {
    "short": Profile(
        name="short",
        trace_seeds=(0, 1),
        trace_stop_at=1.0,
        device_per_type=4,
        device_jobs=400,
        device_seed=1,
        speed=((10, 200), (100, 40), (1000, 6)),
        search_quick=True,
        earlier_variants=False,
        scale=scale.SHORT,
    ),
    "full": Profile(
        name="full",
        trace_seeds=tuple(range(10)),
        trace_stop_at=1.3,
        device_per_type=8,
        device_jobs=2000,
        device_seed=1,
        speed=((10, 500), (100, 100), (1000, 20), (10000, 3)),
        search_quick=False,
        earlier_variants=True,
        scale=scale.FULL,
    ),
}


def trace_policies(earlier_variants: bool = False) -> dict[str, tuple[PolicyFactory, ReplayProtocol]]:
    """Every trace policy with the protocol it is replayed under. The paper's policies and ours run
    under the simulator's protocol (the reference); our earlier replay of FGD (exact scores, random or
    list-order ties, its protocol) stays as labelled extras, of every paper policy with `earlier_variants`."""
    policies: dict[str, tuple[PolicyFactory, ReplayProtocol]] = {
        name: (factory, SIMULATOR) for name, factory in PAPER_POLICIES.items()
    }
    for name, policy in PAPER_POLICIES.items():
        if policy is RandomFit or (name != "fgd" and not earlier_variants):
            continue
        # Short profile: the list-order variant only (the figure the README quoted before the reference).
        for ties in (Ties.RANDOM, Ties.FIRST) if earlier_variants else (Ties.FIRST,):
            extra = variant(policy, ties, Resolution.EXACT)  # type: ignore[arg-type]
            policies[extra.name] = (extra, EARLIER)
    policies["topoplace"] = (topoplace_factory(Mode.DEFAULT), SIMULATOR)
    policies["topoplace-hami"] = (topoplace_factory(Mode.HAMI), SIMULATOR)
    policies[EngineTracePolicy.name] = (EngineTracePolicy, SIMULATOR)
    return policies


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_trace(
    nodes_path: Path, pods_path: Path, profile: Profile, only: Sequence[str] = ()
) -> dict[str, list[ReplayResult]]:
    nodes = load_nodes(nodes_path)
    pods = load_pods(pods_path)
    classes = {protocol.name: protocol.classes(pods) for protocol in (SIMULATOR, EARLIER)}
    out: dict[str, list[ReplayResult]] = {}
    for name, (factory, protocol) in trace_policies(profile.earlier_variants).items():
        if only and name not in only:
            continue
        out[name] = []
        for seed in profile.trace_seeds:
            result = replay(
                nodes,
                pods,
                factory,
                classes[protocol.name],
                seed=seed,
                stop_at=profile.trace_stop_at,
                protocol=protocol,
            )
            out[name].append(result)
            _log(f"trace {name} seed {seed}: unallocated {result.unallocated_pct:.2f} % ({result.seconds:.1f} s)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
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
    machine = Machine.here()
    now = dt.datetime.now(dt.UTC)
    run_dir, latest_dir = output_dirs(args.out, now)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    _log(f"profile {profile.name}: trace replay ({len(profile.trace_seeds)} seeds)")
    trace = run_trace(args.nodes, args.pods, profile)
    _log(f"trace replay of {args.multigpu_pods.name} ({', '.join(MULTIGPU_POLICIES)})")
    multigpu = run_trace(args.nodes, args.multigpu_pods, profile, only=MULTIGPU_POLICIES)
    _log("device-level quality on synthetic fixture clusters")
    device: list[DevicePolicyResult] = run_all(profile.device_per_type, profile.device_jobs, profile.device_seed)
    _log("engine speed")
    speed: list[SpeedRun] = []
    for nodes, decisions in profile.speed:
        for mode in (Mode.DEFAULT, Mode.HAMI):
            speed.append(measure(nodes, decisions, mode))
            _log(f"engine {mode.value} at {nodes} nodes: {speed[-1].decisions_per_s:.1f} decisions/s")
    _log("per-node search speed")
    search = search_speed.run(profile.search_quick)
    _log("pipeline speed through the broker (1 placer, then 2)")
    pipeline_runs = pipeline_speed.measure_profile(profile.name, placer_counts=(1, 2))
    for run in pipeline_runs:
        _log(run.summary())
    pipeline = [run.headline() for run in pipeline_runs]  # the highest offered load: pipeline.*.placers<n>
    _log("scale: decisions on realistic nodes, a gang under 10,000 hypernodes, the placer's memory")
    scaled = scale.run(profile.scale, _log)

    figures = (
        build_figures(trace, device, speed, search, pipeline)
        + second_list_figures("trace_multigpu20", multigpu)
        + pipeline_speed.step_figure_list(pipeline_runs)
    )
    figures += scale.figures(scaled)
    figures += vendor_fragmentation.section()  # MetaX and Neuron: binpack against fragmentation
    notes = build_notes(trace, device, speed, search) + scale.notes(scaled) + pipeline_speed.goal_notes(figures)
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
        notes=tuple(notes),
    )
    label = machine.label()
    plot_paths = {
        "fragmentation_curve.png": plots.fragmentation_curve(
            trace, PUBLISHED_UNALLOCATED_PCT, run_dir / "fragmentation_curve.png", label
        ),
        "quality_vs_baseline.png": plots.quality_vs_baseline(device, run_dir / "quality_vs_baseline.png", label),
        "latency_histogram.png": plots.latency_histogram(
            [r for r in speed if r.mode == Mode.DEFAULT.value], run_dir / "latency_histogram.png", label
        ),
        "decisions_per_s.png": plots.decisions_per_second(speed, run_dir / "decisions_per_s.png", label),
    }
    markdown = build_markdown(
        results,
        trace,
        device,
        speed,
        search,
        pipeline_speed.markdown_section(pipeline_runs),
        scale_section=scale.markdown(scaled),
    )
    write_results(results, markdown, plot_paths, run_dir, latest_dir)
    _log(f"wrote {run_dir} and {latest_dir} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
