"""Pipeline speed through the broker: sustained pods/s and pending -> bound latency.

The real pipeline, started as the demo starts it: the embedded broker, the test
Kubernetes API server seeded with the demo cluster's nodes and network tree, and
the collectors, placer(s) and binder as separate `topoplace` processes (two
placers share one consumer group). For each load step, pods that all fit are
created at the offered rate; each is timed from the moment its create call
returned (the pod exists, pending) to its BindingEvent's `finished_at` (the
binder's clock: the bind is done). The step's pods are then deleted and the
deletions seen on `pods.lifecycle` before the next step, so every step starts
on an empty cluster of the same pipeline. Each process's CPU time over a step
(from /proc) shows which one limits the rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import msgspec
import numpy as np
from kubernetes_asyncio import client as k8s

from bench.results import Figure, Machine
from schemas import topics
from schemas.events import BindingEvent, BindingOutcome, LifecyclePhase, PodLifecycleEvent
from topoplace.config import Settings
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.dev.demo import cluster as demo_cluster
from topoplace.dev.demo import processes, workload
from topoplace.dev.demo.runner import NAMESPACE, seed_cluster, wait_nodes_published, wait_ready
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.records import Received
from topoplace.kube import api_client

# The workload's shared-GPU pod: a quarter of one NVIDIA GPU's cores and 4 GB of its memory.
# The demo cluster's 120 NVIDIA GPUs hold 480 of them, so a step of up to that many all fit.
POD_KIND = next(k for k in workload.MIX if k.name == "nvidia-share")
STEP_CAPACITY = 480
# The goals: sustained pods/s with one placer and one binder, and the p99 pending -> bound at 500 offered.
GOAL_PODS_PER_S = 2000.0
GOAL_OFFERED = 500.0
GOAL_P99_MS = 100.0
BENCH_LABEL = "topoplace.io/bench-step"
STARTUP_TIMEOUT_S = 90.0
WARMUP_PODS = 4  # each placer's first decisions build caches; not part of any step


class LoadStep(msgspec.Struct, frozen=True, kw_only=True):
    offered_pods_per_s: float
    pods: int


class PipelineFigures(msgspec.Struct, frozen=True, kw_only=True):
    placers: int  # 1 or 2 placer instances, one binder
    offered_pods_per_s: float
    sustained_pods_per_s: float  # bound pods / (last bound - first submitted)
    p50_pending_to_bound_ms: float
    p99_pending_to_bound_ms: float
    pods: int
    bound: int = 0
    unschedulable: int = 0
    unfinished: int = 0  # neither bound nor unschedulable when the step timed out
    conflicts: int = 0  # binds refused (devices taken, pod gone) that sent a pod back to the placer
    cores_by_service: dict[str, float] = {}  # CPU seconds used during the step / its wall time (1.0 = a core)
    submitted_pods_per_s: float = 0.0  # what the load generator achieved (it may fall behind the offer)
    machine: str = ""

    def busiest(self) -> tuple[str, float] | None:
        return max(self.cores_by_service.items(), key=lambda kv: kv[1]) if self.cores_by_service else None


class PipelineRun(msgspec.Struct, frozen=True, kw_only=True):
    """One pipeline (one placer count) through every load step; `error` when it could not run."""

    placers: int
    steps: tuple[PipelineFigures, ...] = ()
    error: str = ""

    def summary(self) -> str:
        if self.error:
            return f"pipeline with {self.placers} placer(s) not measured: {self.error}"
        rates = ", ".join(f"{s.offered_pods_per_s:g}/s offered -> {s.sustained_pods_per_s:.1f}/s" for s in self.steps)
        return f"pipeline with {self.placers} placer(s): {rates}"

    def headline(self) -> PipelineFigures | None:
        """The highest offered load's figures: the `pipeline.*.placers<n>` figures."""
        return max(self.steps, key=lambda s: s.offered_pods_per_s) if self.steps else None


PLANS: dict[str, tuple[LoadStep, ...]] = {
    "short": (
        LoadStep(offered_pods_per_s=20.0, pods=60),
        LoadStep(offered_pods_per_s=50.0, pods=100),
        LoadStep(offered_pods_per_s=100.0, pods=150),
        LoadStep(offered_pods_per_s=200.0, pods=200),
        LoadStep(offered_pods_per_s=GOAL_OFFERED, pods=STEP_CAPACITY),
    ),
    "full": (
        LoadStep(offered_pods_per_s=20.0, pods=200),
        LoadStep(offered_pods_per_s=50.0, pods=300),
        LoadStep(offered_pods_per_s=100.0, pods=400),
        LoadStep(offered_pods_per_s=200.0, pods=400),
        LoadStep(offered_pods_per_s=400.0, pods=400),
        LoadStep(offered_pods_per_s=GOAL_OFFERED, pods=STEP_CAPACITY),
    ),
}


def step_plan(profile: str) -> tuple[LoadStep, ...]:
    """The load steps of a profile, rising load; every step's pods fit the cluster at once."""
    try:
        plan = PLANS[profile]
    except KeyError:
        raise ValueError(f"profile: no pipeline plan for {profile!r} (known: {', '.join(sorted(PLANS))})") from None
    check_plan(plan)
    return plan


def check_plan(plan: Sequence[LoadStep]) -> None:
    for i, step in enumerate(plan):
        if step.offered_pods_per_s <= 0:
            raise ValueError(f"step {i}: offered_pods_per_s must be > 0, got {step.offered_pods_per_s}")
        if not 1 <= step.pods <= STEP_CAPACITY:
            raise ValueError(f"step {i}: pods must be 1..{STEP_CAPACITY} (all must fit at once), got {step.pods}")


def cpu_seconds(stat_line: str, ticks_per_s: int) -> float:
    """User + system CPU time of a process, from its /proc/<pid>/stat line."""
    # The command name may hold spaces and parentheses: fields are counted after its last ')'.
    # There field 3 (state) is index 0, so utime (14) and stime (15) are indices 11 and 12.
    fields = stat_line.rsplit(")", 1)[-1].split()
    if len(fields) < 13:
        raise ValueError(f"stat_line: too few fields after the command name ({len(fields)})")
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def read_cpu_seconds(pids: Mapping[str, int]) -> dict[str, float]:
    """Service -> CPU seconds so far; services whose /proc entry cannot be read are left out."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            out[name] = cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), ticks)
        except (OSError, ValueError):
            continue  # not Linux, or the process is gone: that service's share is not reported
    return out


def cores_used(before: Mapping[str, float], after: Mapping[str, float], wall_s: float) -> dict[str, float]:
    """CPU seconds each service used between two readings, per second of wall time."""
    if wall_s <= 0:
        return {}
    return {name: round((after[name] - before[name]) / wall_s, 3) for name in before if name in after}


def step_figures(
    *,
    placers: int,
    step: LoadStep,
    submitted_at: Mapping[str, float],
    bound_at: Mapping[str, float],
    unschedulable: int,
    conflicts: int = 0,
    cores_by_service: Mapping[str, float] | None = None,
    machine: str = "",
) -> PipelineFigures:
    """Figures of one step from wall-clock timestamps (seconds): pod -> created, pod -> bound.

    Latency percentiles are numpy's linear interpolation over the bound pods;
    sustained rate = bound pods / (last bound - first submitted).
    """
    missing = sorted(set(bound_at) - set(submitted_at))
    if missing:
        raise ValueError(f"bound_at: pods never submitted: {missing[:3]}")
    latencies_ms = np.array([1000.0 * (bound_at[p] - submitted_at[p]) for p in bound_at])
    first, last_submit = (min(submitted_at.values()), max(submitted_at.values())) if submitted_at else (0.0, 0.0)
    span = max(bound_at.values()) - first if bound_at else 0.0
    submit_span = last_submit - first
    return PipelineFigures(
        placers=placers,
        offered_pods_per_s=step.offered_pods_per_s,
        sustained_pods_per_s=len(bound_at) / span if span > 0 else 0.0,
        p50_pending_to_bound_ms=float(np.percentile(latencies_ms, 50)) if len(latencies_ms) else float("nan"),
        p99_pending_to_bound_ms=float(np.percentile(latencies_ms, 99)) if len(latencies_ms) else float("nan"),
        pods=step.pods,
        bound=len(bound_at),
        unschedulable=unschedulable,
        unfinished=step.pods - len(bound_at) - unschedulable,
        # n pods span n - 1 intervals
        submitted_pods_per_s=(len(submitted_at) - 1) / submit_span if submit_span > 0 else 0.0,
        conflicts=conflicts,
        cores_by_service=dict(cores_by_service or {}),
        machine=machine,
    )


# --- the running pipeline -------------------------------------------------------------------


class BindingOutcomes:
    """Follows `bindings` and `pods.lifecycle`: when each pod was bound, refused, deleted."""

    def __init__(self) -> None:
        self.bound_at: dict[str, float] = {}
        self.unschedulable: set[str] = set()
        self.deleted: set[str] = set()
        self.conflicts: dict[str, int] = {}  # uid -> binds refused (conflict / failed)
        self.changed = asyncio.Event()

    async def handle(self, received: Received) -> None:
        event = received.event
        if isinstance(event, BindingEvent):
            if event.outcome == BindingOutcome.BOUND:
                self.bound_at.setdefault(event.uid, event.finished_at)
                self.unschedulable.discard(event.uid)
            elif event.outcome == BindingOutcome.UNSCHEDULABLE:
                if event.uid not in self.bound_at:  # a bound pod stays bound
                    self.unschedulable.add(event.uid)
            else:  # conflict / failed: the placer plans the pod again
                self.conflicts[event.uid] = self.conflicts.get(event.uid, 0) + 1
                return
        elif isinstance(event, PodLifecycleEvent) and event.phase == LifecyclePhase.DELETED:
            self.deleted.add(event.uid)
        else:
            return
        self.changed.set()

    def final(self, uids: set[str]) -> int:
        return len(uids & (self.bound_at.keys() | self.unschedulable))

    async def wait_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Until done() is true (re-checked on every outcome) or the timeout; True if done."""
        deadline = time.monotonic() + timeout_s
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
        return True


class RunningPipeline:
    """The started services, the API client and the outcomes seen so far; runs load steps."""

    def __init__(
        self,
        core: k8s.CoreV1Api,
        outcomes: BindingOutcomes,
        children: list[processes.ServiceProcess],
        broker_pid: int | None,
    ) -> None:
        self.core = core
        self.outcomes = outcomes
        self.children = children
        self.steps_run = 0
        self.pids = {c.name: c.process.pid for c in children if c.process is not None}
        self.pids["load-generator"] = os.getpid()  # this process: pod submission and the bindings follower
        if broker_pid is not None:
            self.pids["broker"] = broker_pid

    def check_alive(self) -> None:
        if dead := processes.exited(self.children):
            raise RuntimeError(f"{dead[0].name} exited early: {_tail(dead[0].log_path)}")

    async def run_step(self, step: LoadStep, *, placers: int, timeout_s: float) -> PipelineFigures:
        index = self.steps_run
        self.steps_run += 1
        settings_scheduler = Settings().scheduler_name  # the children run with the default
        submitted_at: dict[str, float] = {}
        interval = 1.0 / step.offered_pods_per_s
        cpu_before = read_cpu_seconds(self.pids)
        start = time.monotonic()
        for i in range(step.pods):
            # An absolute schedule: a slow create call is caught up, not added to every gap.
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing the load generator, not synchronisation
            pod = workload.DemoPod(name=f"bench-{index}-{i:04d}", kind=POD_KIND.name, requests=POD_KIND.requests)
            manifest = workload.pod_manifest(pod, scheduler_name=settings_scheduler)
            manifest["metadata"]["labels"][BENCH_LABEL] = str(index)
            created = await self.core.create_namespaced_pod(NAMESPACE, body=manifest)  # type: ignore[arg-type]
            submitted_at[created.metadata.uid] = time.time()
        uids = set(submitted_at)
        await self.outcomes.wait_until(lambda: self.outcomes.final(uids) == len(uids) or self._dead(), timeout_s)
        cores = cores_used(cpu_before, read_cpu_seconds(self.pids), time.monotonic() - start)
        self.check_alive()
        bound_at = {u: t for u, t in self.outcomes.bound_at.items() if u in uids}
        figures = step_figures(
            placers=placers,
            step=step,
            submitted_at=submitted_at,
            bound_at=bound_at,
            unschedulable=len(uids & self.outcomes.unschedulable),
            conflicts=sum(n for u, n in self.outcomes.conflicts.items() if u in uids),
            cores_by_service=cores,
            machine=Machine.here().label(),
        )
        await self._delete_step(index, uids, timeout_s)
        return figures

    def _dead(self) -> bool:
        return bool(processes.exited(self.children))

    async def _delete_step(self, index: int, uids: set[str], timeout_s: float) -> None:
        """Delete the step's pods and wait until their deletions are on `pods.lifecycle` (devices free)."""
        await self.core.delete_collection_namespaced_pod(NAMESPACE, label_selector=f"{BENCH_LABEL}={index}")
        # Only pods that held devices get a lifecycle deletion; refused ones never did.
        expected = uids & self.outcomes.bound_at.keys()
        if not await self.outcomes.wait_until(lambda: expected <= self.outcomes.deleted or self._dead(), timeout_s):
            raise TimeoutError(f"step {index}: deletions not seen on pods.lifecycle after {timeout_s:.0f} s")
        self.check_alive()


def _tail(path: Path, max_chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-max_chars:]
    except OSError as exc:
        return f"(no log: {exc})"


@contextlib.asynccontextmanager
async def running_pipeline(*, placers: int, log_dir: Path) -> AsyncIterator[RunningPipeline]:
    """Broker, API server, collectors, `placers` placers and one binder, all caught up and ready."""
    if placers < 1:
        raise ValueError(f"placers: must be at least 1, got {placers}")
    cluster = demo_cluster.default_cluster()
    children: list[processes.ServiceProcess] = []
    env = processes.with_run_key(
        {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOPOPLACE_", "KAFKA_"))}
    )
    async with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap
        await ensure_topics(bootstrap)
        env["KAFKA_BOOTSTRAP"] = bootstrap
        try:
            kube_api, url = await processes.start(
                "kube-api", ["kube-api", "serve", "--port", "0"], env=env, log_dir=log_dir, first_line=True
            )
            children.append(kube_api)
            env["TOPOPLACE_KUBE_API_URL"] = url
            api = await api_client(Settings.from_env(env))
            async with api:
                await seed_cluster(api, cluster)
                fleet_file = log_dir / "fleet.json"
                fleet_file.write_bytes(msgspec.json.encode(demo_cluster.fleet_of(cluster)))
                placer_ports = [free_port() for _ in range(placers)]
                services: list[tuple[str, list[str], dict[str, str]]] = [
                    ("collector-cluster", ["collector", "cluster", "--resync", "60"], {}),
                    ("collector-nodes", ["collector", "fleet", "--fleet", str(fleet_file)], {}),
                    ("binder", ["binder"], {}),
                ]
                services += [
                    (f"placer-{i}", ["placer"], {"TOPOPLACE_HEALTH_PORT": str(port)})
                    for i, port in enumerate(placer_ports)
                ]
                for name, args, extra in services:
                    child, _ = await processes.start(
                        name, args, env={**env, "TOPOPLACE_HEALTH_PORT": "0", **extra}, log_dir=log_dir
                    )
                    children.append(child)
                outcomes = BindingOutcomes()
                follower = TopicFollower(bootstrap, [topics.BINDINGS, topics.PODS_LIFECYCLE], service="topoplace-bench")
                follow_task = asyncio.create_task(follower.run(outcomes.handle))
                try:
                    await wait_nodes_published(bootstrap, {n.name for n in cluster.nodes}, STARTUP_TIMEOUT_S)
                    for port in placer_ports:
                        await wait_ready(f"http://127.0.0.1:{port}/readyz", timeout_s=STARTUP_TIMEOUT_S, what="placer")
                    pipeline = RunningPipeline(k8s.CoreV1Api(api), outcomes, children, broker.pid)
                    pipeline.check_alive()
                    yield pipeline
                finally:
                    await follower.stop()
                    follow_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await follow_task
        finally:
            for child in reversed(children):
                await processes.stop(child)


async def measure_steps(*, placers: int, steps: Sequence[LoadStep], timeout_s: float = 60.0) -> PipelineRun:
    """Every step on one pipeline with `placers` placers, after a small warm-up step."""
    check_plan(steps)
    log_dir = Path(tempfile.mkdtemp(prefix=f"topoplace-bench-pipeline-{placers}-"))
    try:
        async with running_pipeline(placers=placers, log_dir=log_dir) as pipeline:
            await pipeline.run_step(
                LoadStep(offered_pods_per_s=10.0, pods=WARMUP_PODS * placers), placers=placers, timeout_s=timeout_s
            )
            figures = [await pipeline.run_step(step, placers=placers, timeout_s=timeout_s) for step in steps]
    except Exception as exc:  # noqa: BLE001 - the benchmark reports what failed and keeps the logs
        return PipelineRun(placers=placers, error=f"{type(exc).__name__}: {exc} (service logs in {log_dir})")
    shutil.rmtree(log_dir, ignore_errors=True)
    return PipelineRun(placers=placers, steps=tuple(figures))


def measure_profile(profile: str, placer_counts: Sequence[int] = (1, 2)) -> list[PipelineRun]:
    """The profile's load steps, once per placer count, each on a fresh pipeline."""
    plan = step_plan(profile)
    return [asyncio.run(measure_steps(placers=p, steps=plan)) for p in placer_counts]


# --- figures and the report section ---------------------------------------------------------


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b > 0 else None


def step_figure_list(runs: Sequence[PipelineRun]) -> list[Figure]:
    """Per-step figures `pipeline.<key>.placers<n>.offered<rate>` and the 2-over-1 ratio per step."""
    out: list[Figure] = []
    by_placers = {r.placers: r for r in runs}
    for run in runs:
        if run.error:
            out.append(
                Figure(name=f"pipeline.not_measured.placers{run.placers}", value=None, unit="", detail=run.error)
            )
        for s in run.steps:
            suffix = f"placers{run.placers}.offered{s.offered_pods_per_s:g}"
            cpu = ", ".join(f"{name} {c:.2f}" for name, c in sorted(s.cores_by_service.items(), key=lambda kv: -kv[1]))
            detail = f"{s.pods} pods, {s.bound} bound, {s.unschedulable} unschedulable; cores used: {cpu}; {s.machine}"
            for key, unit in (
                ("sustained_pods_per_s", "pods/s"),
                ("p50_pending_to_bound_ms", "ms"),
                ("p99_pending_to_bound_ms", "ms"),
            ):
                out.append(
                    Figure(name=f"pipeline.{key}.{suffix}", value=round(getattr(s, key), 3), unit=unit, detail=detail)
                )
            out.append(Figure(name=f"pipeline.unschedulable.{suffix}", value=float(s.unschedulable), unit="pods"))
            out.append(Figure(name=f"pipeline.bind_conflicts.{suffix}", value=float(s.conflicts), unit="binds"))
    one, two = by_placers.get(1), by_placers.get(2)
    out += goal_figures(one)
    if one is not None and two is not None:
        for a, b in zip(one.steps, two.steps, strict=False):
            out.append(
                Figure(
                    name=f"pipeline.sustained_ratio_2_over_1.offered{a.offered_pods_per_s:g}",
                    value=_ratio(b.sustained_pods_per_s, a.sustained_pods_per_s),
                    unit="ratio",
                    detail="sustained pods/s with two placers over one; the machine-independent figure",
                )
            )
    return out


def goal_figures(one: PipelineRun | None) -> list[Figure]:
    """`pipeline.pods_per_s` (the most sustained with one placer) and `pipeline.p99_ms.500`, with their goals."""
    if one is None or not one.steps:
        return []
    best = max(one.steps, key=lambda s: s.sustained_pods_per_s)
    out = [
        Figure(
            name="pipeline.pods_per_s",
            value=round(best.sustained_pods_per_s, 3),
            unit="pods/s",
            baselines={"offered": best.offered_pods_per_s, "goal": GOAL_PODS_PER_S},
            detail="the most sustained pending -> bound with one placer and one binder over the offered loads",
        )
    ]
    at_goal = [s for s in one.steps if s.offered_pods_per_s == GOAL_OFFERED]
    if at_goal:
        step = at_goal[0]
        out.append(
            Figure(
                name=f"pipeline.p99_ms.{GOAL_OFFERED:g}",
                value=round(step.p99_pending_to_bound_ms, 3),
                unit="ms",
                baselines={"p50": round(step.p50_pending_to_bound_ms, 3), "goal": GOAL_P99_MS},
                detail=f"pending -> bound at {GOAL_OFFERED:g} pods/s offered ({step.pods} pods), one placer",
            )
        )
    return out


def goal_notes(figures: Sequence[Figure]) -> list[str]:
    """Each pipeline goal met or not, said plainly."""
    out = []
    for figure in figures:
        goal = figure.baselines.get("goal")
        if not figure.name.startswith("pipeline.") or goal is None or figure.value is None:
            continue
        met = figure.value >= goal if figure.unit == "pods/s" else figure.value <= goal
        verdict = "within" if met else "NOT within"
        out.append(f"{figure.name} = {figure.value:g} {figure.unit}: {verdict} its goal of {goal:g}.")
    return out


def markdown_section(runs: Sequence[PipelineRun]) -> str:
    """The pipeline table (one row per placer count and step), or why a pipeline was not measured."""
    machine = next((s.machine for r in runs for s in r.steps if s.machine), Machine.here().label())
    lines = [
        f"Real services as separate processes on the embedded broker and the test API server, on {machine}; "
        f"pods of the workload's `{POD_KIND.name}` kind (all fit), bound pods deleted between steps. "
        "Latency: create call returned → the binder's BindingEvent; sustained = bound / (last bound − first created). "
        "Cores: CPU seconds a process used during the step per second of it (1.00 = one core busy). "
        "Absolute figures are for this machine only; the 2-placer / 1-placer ratio is the comparable figure.",
        "",
        "| placers | offered pods/s | submitted pods/s | pods | bound | unschedulable | bind conflicts "
        "| sustained pods/s | p50 ms | p99 ms | busiest process (cores) | all processes (cores) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for s in run.steps:
            busiest = s.busiest()
            lines.append(
                f"| {run.placers} | {s.offered_pods_per_s:g} | {s.submitted_pods_per_s:.1f} | {s.pods} | {s.bound} "
                f"| {s.unschedulable} | {s.conflicts} | {s.sustained_pods_per_s:.1f} | {s.p50_pending_to_bound_ms:.0f} "
                f"| {s.p99_pending_to_bound_ms:.0f} | {f'{busiest[0]} {busiest[1]:.2f}' if busiest else '—'} "
                f"| {sum(s.cores_by_service.values()):.2f} |"
            )
    for r in runs:
        if r.error:
            lines.append(f"\n{r.placers} placer(s): not measured: {r.error}")
    by_placers = {r.placers: r for r in runs}
    if 1 in by_placers and 2 in by_placers:
        ratios = [
            f"{a.offered_pods_per_s:g}/s: {ratio:.2f}"
            for a, b in zip(by_placers[1].steps, by_placers[2].steps, strict=False)
            if (ratio := _ratio(b.sustained_pods_per_s, a.sustained_pods_per_s)) is not None
        ]
        if ratios:
            lines += ["", "Sustained pods/s, 2 placers / 1 placer, by offered load: " + "; ".join(ratios) + "."]
    return "\n".join(lines)
