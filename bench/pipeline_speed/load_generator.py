"""The load generator: pods submitted at the offered rate into a running pipeline, and the outcomes it
follows on `bindings` and `pods.lifecycle` (bound, refused, deleted) until every pod of a step is final."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes_asyncio import client as k8s

from bench.pipeline_speed.measurement import PipelineFigures, cores_used, read_cpu_seconds, step_figures
from bench.pipeline_speed.plan import POD_KIND, LoadStep
from bench.results import Machine
from schemas.events import BindingEvent, BindingOutcome, LifecyclePhase, PodLifecycleEvent
from topoplace.config import Settings
from topoplace.dev.demo import processes, workload
from topoplace.dev.demo.runner import NAMESPACE
from topoplace.kafka.records import Received

BENCH_LABEL = "topoplace.io/bench-step"


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
