"""The benchmark's sections: each a step that measures one thing and keeps its raw results in the run.

`bench.run` runs them in the order of its SECTIONS table; `bench.report.run_report` turns the filled
BenchRun into results.json, results.md and the plots. A section beyond the built-in ones adds its
report as a SectionReport to `BenchRun.extra` (its figures and notes come after the others', its
Markdown before the notes).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from bench import (
    dra_speed,
    pipeline_speed,
    pod_topology_speed,
    preempt_speed,
    scale,
    search_speed,
    vendor_fragmentation,
)
from bench.device_replay import DevicePolicyResult, run_all
from bench.engine_speed import SpeedRun, measure
from bench.pipeline_speed import PipelineRun
from bench.profiles import Profile
from bench.results import SectionReport
from bench.scale import ScaleResults
from bench.search_speed import SearchFigure
from bench.topoplace_trace import EngineTracePolicy, topoplace_factory
from bench.trace import load_nodes, load_pods
from bench.trace_policies import PAPER_POLICIES, PolicyFactory, RandomFit, Resolution, Ties, variant
from bench.trace_replay import EARLIER, SIMULATOR, ReplayProtocol, ReplayResult, replay
from engine import Mode

MULTIGPU_POLICIES = ("fgd", EngineTracePolicy.name)  # the second pod list: FGD against our policy only


class TraceFiles(msgspec.Struct, frozen=True, kw_only=True):
    """The node list and the two pod lists replayed (Alibaba v2023 CSV format)."""

    nodes: Path
    pods: Path
    multigpu_pods: Path


class BenchRun(msgspec.Struct, kw_only=True):
    """One run of the benchmark: its profile and inputs, and each section's raw results once measured."""

    profile: Profile
    trace_files: TraceFiles
    trace: dict[str, list[ReplayResult]] = {}
    multigpu: dict[str, list[ReplayResult]] = {}
    device: list[DevicePolicyResult] = []
    speed: list[SpeedRun] = []
    search: list[SearchFigure] = []
    pipeline: list[PipelineRun] = []
    scale: ScaleResults = msgspec.field(default_factory=ScaleResults)
    extra: list[SectionReport] = []  # the reports of sections registered after the built-in ones


Section = Callable[[BenchRun], None]


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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


def replay_pod_list(
    nodes_path: Path, pods_path: Path, profile: Profile, only: Sequence[str] = ()
) -> dict[str, list[ReplayResult]]:
    """Every trace policy (or those in `only`) replayed over one pod list, once per seed of the profile."""
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
            log(f"trace {name} seed {seed}: unallocated {result.unallocated_pct:.2f} % ({result.seconds:.1f} s)")
    return out


def replay_trace(run: BenchRun) -> None:
    """Section 1: fragmentation on the Alibaba GPU trace, every policy."""
    log(f"profile {run.profile.name}: trace replay ({len(run.profile.trace_seeds)} seeds)")
    run.trace = replay_pod_list(run.trace_files.nodes, run.trace_files.pods, run.profile)


def replay_multigpu_trace(run: BenchRun) -> None:
    """Section 1, second pod list (multi-GPU pods 20 % of GPU pods): FGD and topoplace-frag only."""
    files = run.trace_files
    log(f"trace replay of {files.multigpu_pods.name} ({', '.join(MULTIGPU_POLICIES)})")
    run.multigpu = replay_pod_list(files.nodes, files.multigpu_pods, run.profile, only=MULTIGPU_POLICIES)


def measure_device_quality(run: BenchRun) -> None:
    """Section 2: device-level link quality on synthetic fixture clusters."""
    log("device-level quality on synthetic fixture clusters")
    run.device = run_all(run.profile.device_per_type, run.profile.device_jobs, run.profile.device_seed)


def measure_engine_speed(run: BenchRun) -> None:
    """Section 3: whole-snapshot decisions per second, default and HAMi modes, at each size of the profile."""
    log("engine speed")
    for nodes, decisions in run.profile.speed:
        for mode in (Mode.DEFAULT, Mode.HAMI):
            run.speed.append(measure(nodes, decisions, mode))
            log(f"engine {mode.value} at {nodes} nodes: {run.speed[-1].decisions_per_s:.1f} decisions/s")


def measure_search_speed(run: BenchRun) -> None:
    """Section 4: the per-node device search against exhaustive enumeration."""
    log("per-node search speed")
    run.search = search_speed.run(run.profile.search_quick)


def measure_pipeline_speed(run: BenchRun) -> None:
    """Section 5: the real services through the broker, with one placer, then two."""
    log("pipeline speed through the broker (1 placer, then 2)")
    run.pipeline = pipeline_speed.measure_profile(run.profile.name, placer_counts=(1, 2))
    for pipeline in run.pipeline:
        log(pipeline.summary())


def measure_scale(run: BenchRun) -> None:
    """Section 6: decisions on realistic nodes, a gang under 10,000 hypernodes, the placer's memory."""
    log("scale: decisions on realistic nodes, a gang under 10,000 hypernodes, the placer's memory")
    run.scale = scale.run(run.profile.scale, log)


def measure_vendor_fragmentation(run: BenchRun) -> None:
    """MetaX and Neuron clusters: binpack against the fragmentation policy (bench/vendor_fragmentation.py)."""
    log("fragmentation on MetaX and Neuron clusters")
    runs = vendor_fragmentation.run(vendor_fragmentation.SEEDS)
    title = "Fragmentation on MetaX and Neuron clusters (generated workload)"
    markdown = vendor_fragmentation.markdown(runs).split("\n", 1)[1].lstrip("\n")  # its `## title` line is ours
    run.extra.append(SectionReport(title=title, figures=tuple(vendor_fragmentation.figures(runs)), markdown=markdown))


def measure_pod_topology(run: BenchRun) -> None:
    """Pods with anti-affinity and spread constraints at 10,000 nodes, beside every node asked
    (bench/pod_topology_speed.py)."""
    settings = pod_topology_speed.PROFILES.get(run.profile.name, pod_topology_speed.PROFILES["short"])
    log(f"pod anti-affinity and topology spread at {settings.nodes} nodes")
    result = pod_topology_speed.measure(settings)
    log(f"pod topology: warm p99 {result.percentile('warm_ms', 99):.2f} ms, {len(result.mismatches)} mismatches")
    run.extra.append(
        SectionReport(
            title=pod_topology_speed.TITLE,
            figures=tuple(pod_topology_speed.figures(result)),
            markdown=pod_topology_speed.markdown(result),
        )
    )


def measure_preemption(run: BenchRun) -> None:
    """Preemption at 10,000 nodes, cold and warm, and its victims against exhaustive search (bench/preempt_speed.py)."""
    log("preemption speed and victims")
    run.extra.append(preempt_speed.run(log))


def measure_dra_speed(run: BenchRun) -> None:
    """DRA: the structured allocator on an NVL72 node's 8 GPUs and a 4-partition MIG claim, warm, and a
    search with no solution ending at its bound (bench/dra_speed.py)."""
    log("DRA allocation speed")
    timings = dra_speed.run()
    for t in timings:
        log(f"dra {t.name}: p50 {t.p50_ms:.3f} ms, p99 {t.p99_ms:.3f} ms{' (' + t.error + ')' if t.error else ''}")
    run.extra.append(
        SectionReport(
            title="DRA allocation speed (structured allocator)",
            figures=tuple(dra_speed.figures(timings)),
            markdown=dra_speed.markdown(timings),
        )
    )
