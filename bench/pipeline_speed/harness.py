"""The process harness: the real services started as the demo starts them, one pipeline per placer count,
every load step of a profile run on it after a small warm-up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import msgspec
from kubernetes_asyncio import client as k8s

from bench.pipeline_speed.load_generator import BindingOutcomes, RunningPipeline
from bench.pipeline_speed.measurement import PipelineRun
from bench.pipeline_speed.plan import LoadStep, check_plan, step_plan
from schemas import topics
from topoplace.config import Settings
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.dev.demo import cluster as demo_cluster
from topoplace.dev.demo import processes
from topoplace.dev.demo.runner import seed_cluster, wait_nodes_published, wait_ready
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.follower import TopicFollower
from topoplace.kube import api_client

STARTUP_TIMEOUT_S = 90.0
WARMUP_PODS = 4  # each placer's first decisions build caches; not part of any step


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
