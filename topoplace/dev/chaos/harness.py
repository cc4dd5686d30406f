"""A chaos run: the pipeline as separate processes, a fault schedule against it, the checker's verdict.

Loopback only and bounded: a fixed number of pods, a fault window, a convergence time limit; it
stops every process it started and ends by itself. Two placers and two binders run throughout; the
schedule kills each service once per round with SIGKILL (restarted after a pause, as a Deployment
would) and restarts the in-memory broker empty; the test API server fails a seeded fraction of
requests with every kind it knows (429, 500, 503, timeout, reset, applied-but-reply-lost).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from schemas.annotations import SCHEDULER_NAME
from schemas.seal import DecisionKey
from topoplace.config import DECISION_KEY
from topoplace.dev.broker import EmbeddedBroker
from topoplace.dev.chaos import checker, priority_mix
from topoplace.dev.chaos.api_calls import create as _create
from topoplace.dev.chaos.api_calls import delete as _delete
from topoplace.dev.chaos.cluster_read import read_cluster
from topoplace.dev.chaos.cluster_seed import PODGROUPS, gang_manifests, seed_cluster
from topoplace.dev.chaos.hostile import HostileActor, HostileTally
from topoplace.dev.chaos.report import ChaosReport
from topoplace.dev.chaos.schedule import BROKER_RESTART, KILLABLE, FaultEvent, schedule
from topoplace.dev.demo import cluster as demo_cluster
from topoplace.dev.demo import processes, workload
from topoplace.dev.demo.runner import wait_nodes_published
from topoplace.dev.kubeapi.faults import KINDS as API_FAULT_KINDS
from topoplace.kafka.admin import ensure_topics

NAMESPACE = "default"
SUBMITTERS = 8  # creations in flight at once
UNCONVERGED_SAMPLES = 20  # pods named in the report when a run does not converge
# A loopback request answers in milliseconds; an injected `timeout` never does: give up on it soon.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=2.0)


class ChaosOptions(msgspec.Struct, frozen=True, kw_only=True):
    pods: int = 500  # single pods; gang members come on top
    gangs: int = 10  # of 2 to 4 one-GPU members each
    seed: int = 11
    rounds: int = 1  # each process fault this many times
    api_fault_rate: float = 0.12
    submit_rate_per_s: float = 60.0
    restart_pause_s: float = 1.0  # between a kill and the restart
    converge_timeout_s: float = 180.0
    resync_s: float = 10.0  # the cluster watcher's relist period
    placers: int = 2
    binders: int = 2
    process_faults: bool = True  # False: API faults only (to tell the two apart when a run fails)
    # After the first `churn_after` pods, each submission deletes the oldest single pod with this
    # probability: freed devices keep the placers and binders working once the cluster is full.
    churn: float = 0.5
    churn_after: int = 150
    # A hostile tenant and topic producer beside the faults (hostile.py): forged messages, a huge pod,
    # a catastrophic HyperNode pattern, annotation edits after bind, a flood of unplaceable pods.
    hostile: bool = True
    work_dir: Path = Path(".chaos")


class _Service(msgspec.Struct, kw_only=True):
    name: str
    args: tuple[str, ...]
    running: processes.ServiceProcess | None = None
    restart_pending: bool = False


class ChaosRun:
    def __init__(self, options: ChaosOptions) -> None:
        self.options = options
        self.work = options.work_dir
        self.broker = EmbeddedBroker()
        self.env: dict[str, str] = {}
        self.services: dict[str, _Service] = {}
        self.kube_api: processes.ServiceProcess | None = None
        self.url = ""
        self.faults: dict[str, int] = {}
        self.deleted = 0
        self.priorities: dict[str, int] = {}  # the priority given to each single pod submitted, by name
        self.died: list[checker.Violation] = []  # services found exited when nothing had stopped them

    async def run(self) -> ChaosReport:
        started = time.monotonic()
        self.work.mkdir(parents=True, exist_ok=True)
        for old in self.work.glob("*.log"):
            old.unlink()
        try:
            return await self._run(started)
        finally:
            for service in self.services.values():
                if service.running is not None:
                    await processes.stop(service.running, grace_seconds=5)
            if self.kube_api is not None:
                await processes.stop(self.kube_api, grace_seconds=5)
            self.broker.kill_now()

    async def _run(self, started: float) -> ChaosReport:
        bootstrap = await self._start_broker_and_api()
        cluster = demo_cluster.default_cluster()
        async with aiohttp.ClientSession(self.url, timeout=REQUEST_TIMEOUT) as session:
            await seed_cluster(session, cluster, NAMESPACE)
            await priority_mix.seed_classes(session)
            await self._start_services(cluster, bootstrap)
            submitted, tally = await self._load(session, cluster, bootstrap)
        return await self._report(started, submitted + tally.pods, tally)

    async def _start_broker_and_api(self) -> str:
        """The broker with its topics, then the test API server with this run's faults; the broker's address."""
        o = self.options
        bootstrap = await self.broker.start()
        await ensure_topics(bootstrap)
        self.env = processes.with_run_key(
            {
                **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
                "KAFKA_BOOTSTRAP": bootstrap,
                "TOPOPLACE_HEALTH_PORT": "0",
            }
        )
        self.env.pop("TOPOPLACE_EMBEDDED_BROKER", None)
        self.kube_api, self.url = await processes.start(
            "kube-api",
            [
                "kube-api",
                "serve",
                "--port",
                "0",
                "--fault-rate",
                str(o.api_fault_rate),
                "--fault-seed",
                str(o.seed),
            ],  # fmt: skip
            env=self.env,
            log_dir=self.work,
            first_line=True,
        )
        self.env["TOPOPLACE_KUBE_API_URL"] = self.url
        return bootstrap

    async def _start_services(self, cluster: demo_cluster.DemoCluster, bootstrap: str) -> None:
        """Both collectors and the placer and binder replicas; back once every node was published."""
        o = self.options
        fleet = self.work / "fleet.json"
        fleet.write_bytes(msgspec.json.encode(demo_cluster.fleet_of(cluster)))
        replicas = [(f"placer-{chr(97 + i)}", ("placer",)) for i in range(o.placers)]
        replicas += [(f"binder-{chr(97 + i)}", ("binder",)) for i in range(o.binders)]
        for name, args in (
            ("collector-cluster", ("collector", "cluster", "--resync", str(o.resync_s))),
            ("collector-nodes", ("collector", "fleet", "--fleet", str(fleet))),
            *replicas,
        ):
            self.services[name] = _Service(name=name, args=args)
            await self._start(name)
        await wait_nodes_published(bootstrap, {n.name for n in cluster.nodes}, timeout_s=90)

    async def _load(
        self, session: aiohttp.ClientSession, cluster: demo_cluster.DemoCluster, bootstrap: str
    ) -> tuple[int, HostileTally]:
        """The pods and gangs submitted, with the faults and the hostile actor beside; how many, and its tally."""
        o = self.options
        pods = [
            workload.pod_manifest(p, scheduler_name=SCHEDULER_NAME, namespace=NAMESPACE)
            for p in workload.generate(o.pods, o.seed)
        ]
        self.priorities = priority_mix.mix(pods)  # a high-priority stream among the single pods
        gangs = gang_manifests(o.gangs, NAMESPACE)
        submitted = o.pods + sum(len(members) for _, members in gangs)
        window_s = submitted / o.submit_rate_per_s
        plan = schedule(seed=o.seed, window_s=window_s, rounds=o.rounds) if o.process_faults else ()
        plan = tuple(e for e in plan if e.kind.removeprefix("kill:") in self.services or e.kind == BROKER_RESTART)
        fault_task = asyncio.create_task(self._carry_out(plan))
        stop_hostile = asyncio.Event()
        hostile = HostileActor(session=session, bootstrap=bootstrap, nodes=[n.name for n in cluster.nodes], seed=o.seed)
        hostile_task = asyncio.create_task(hostile.run(stop_hostile)) if o.hostile else None
        await self._submit(session, pods, gangs)
        await fault_task
        stop_hostile.set()
        tally = await hostile_task if hostile_task is not None else HostileTally()
        return submitted, tally

    async def _report(self, started: float, submitted: int, tally: HostileTally) -> ChaosReport:
        """Wait for convergence, then count every violation seen, by kind."""
        o = self.options
        quiet_since = time.monotonic()
        verdict, converged_at, seen = await self._converge()
        seen += self._dead_services()
        api = await self._api_faults()
        considered = api.pop("considered", 0)
        all_violations = {(v.kind, v.subject): v for v in (*seen, *verdict.violations)}
        by_kind = dict.fromkeys(checker.VIOLATION_KINDS, 0)
        for kind, _ in all_violations:
            by_kind[kind] = by_kind.get(kind, 0) + 1
        return ChaosReport(
            pods=submitted,
            deleted=self.deleted,
            preempted=verdict.preempted,
            gangs=o.gangs,
            seed=o.seed,
            api_fault_rate=o.api_fault_rate,
            api_requests_considered=considered,
            faults={**api, **self.faults},
            violations=by_kind,
            violation_samples=_samples(all_violations.values()),
            bound=verdict.bound,
            unschedulable=verdict.unschedulable,
            unconverged=len(verdict.unconverged),
            unconverged_samples=verdict.unconverged[:UNCONVERGED_SAMPLES],
            converged=converged_at is not None,
            time_to_converge_s=None if converged_at is None else round(converged_at - quiet_since, 2),
            duration_s=round(time.monotonic() - started, 2),
            hostile=tally.done,
        )

    async def _start(self, name: str) -> None:
        service = self.services[name]
        # A restarted replica keeps its name, as a restarted container keeps its pod's: a binder
        # takes its own Lease back at once.
        env = {**self.env, "TOPOPLACE_LEADER_IDENTITY": name}
        service.running, _ = await processes.start(name, list(service.args), env=env, log_dir=self.work)

    def _key(self) -> DecisionKey:
        """The key this run's services seal and read devices with (processes.with_run_key)."""
        return DecisionKey(self.env[DECISION_KEY].strip().encode())  # as topoplace.config reads it

    def _exited(self, name: str) -> bool:
        running = self.services[name].running
        return running is not None and running.process is not None and running.process.returncode is not None

    def _dead_services(self) -> list[checker.Violation]:
        """Every service must be running at the end, and none may have exited unless killed."""
        dead = list(self.died)
        for name, service in self.services.items():
            process = service.running.process if service.running is not None else None
            if process is None or process.returncode is not None:
                exit_code = None if process is None else process.returncode
                detail = f"not running at the end (exit {exit_code}); see {self.work}/{name}.log"
                dead.append(checker.Violation(kind="service_dead", subject=name, detail=detail))
        return dead

    async def _kill(self, name: str) -> None:
        running = self.services[name].running
        if self._exited(name) and not self.services[name].restart_pending:
            detail = f"exited before its scheduled kill; see {self.work}/{name}.log"
            self.died.append(checker.Violation(kind="service_dead", subject=name, detail=detail))
        if running is not None and running.process is not None and running.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running.process.pid, signal.SIGKILL)
            await running.process.wait()

    async def _carry_out(self, plan: tuple[FaultEvent, ...]) -> None:
        began = time.monotonic()
        restarts: list[asyncio.Task[None]] = []
        for event in plan:
            await asyncio.sleep(max(0.0, began + event.at_s - time.monotonic()))  # the schedule's clock
            self.faults[event.kind] = self.faults.get(event.kind, 0) + 1
            if event.kind == BROKER_RESTART:
                port = int(self.broker.bootstrap.rsplit(":", 1)[1])
                self.broker.kill_now()
                self.broker = EmbeddedBroker(port=port)
                await self.broker.start()
                # What a deployment's topic job does for a new, empty Kafka; the services also
                # create their topics when they reconnect.
                with contextlib.suppress(Exception):
                    await ensure_topics(self.broker.bootstrap)
            else:
                name = event.kind.removeprefix("kill:")
                assert name in KILLABLE
                await self._kill(name)
                # One restart at a time: a second start while one is pending would leave a process
                # nobody tracks, running on after the run.
                if not self.services[name].restart_pending:
                    self.services[name].restart_pending = True
                    restarts.append(asyncio.create_task(self._restart_later(name)))
        await asyncio.gather(*restarts)

    async def _restart_later(self, name: str) -> None:
        service = self.services[name]
        try:
            await asyncio.sleep(self.options.restart_pause_s)  # how long the service stays down
            await self._start(name)
        finally:
            service.restart_pending = False

    async def _submit(
        self,
        session: aiohttp.ClientSession,
        pods: list[dict[str, Any]],
        gangs: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    ) -> None:
        """Paced at the submit rate, a few creations in flight: an injected timeout holds up one, not all."""
        interval = 1.0 / self.options.submit_rate_per_s
        pods_url = f"/api/v1/namespaces/{NAMESPACE}/pods"
        in_flight = asyncio.Semaphore(SUBMITTERS)
        tasks: list[asyncio.Task[None]] = []

        async def create(*bodies: tuple[str, dict[str, Any]], delete: str = "") -> None:
            try:
                for url, body in bodies:  # in order: a gang's PodGroup before its members
                    await _create(session, url, body)
                if delete:
                    await _delete(session, f"{pods_url}/{delete}")
            finally:
                in_flight.release()

        rng = random.Random(self.options.seed)
        oldest: collections.deque[str] = collections.deque()

        # Gangs are spread through the stream of single pods, so some find room and some do not.
        every = max(1, len(pods) // (len(gangs) + 1))
        batches: list[tuple[tuple[str, dict[str, Any]], ...]] = []
        pending_gangs = list(gangs)
        for i, pod in enumerate(pods):
            if pending_gangs and i % every == every - 1:
                podgroup, members = pending_gangs.pop(0)
                batches.append(((PODGROUPS.format(ns=NAMESPACE), podgroup), *((pods_url, m) for m in members)))
            batches.append(((pods_url, pod),))
        for podgroup, members in pending_gangs:
            batches.append(((PODGROUPS.format(ns=NAMESPACE), podgroup), *((pods_url, m) for m in members)))
        for n, batch in enumerate(batches):
            delete = ""
            if n >= self.options.churn_after and oldest and rng.random() < self.options.churn:
                delete = oldest.popleft()
                self.deleted += 1
            if len(batch) == 1:
                oldest.append(batch[0][1]["metadata"]["name"])
            await in_flight.acquire()
            tasks.append(asyncio.create_task(create(*batch, delete=delete)))
            await asyncio.sleep(interval)  # pacing the submissions, not synchronisation
        await asyncio.gather(*tasks)

    async def _converge(self) -> tuple[checker.Verdict, float | None, list[checker.Violation]]:
        """Check until every pod is accounted for (or the time limit); every violation seen is kept."""
        deadline = time.monotonic() + self.options.converge_timeout_s
        seen: list[checker.Violation] = []
        while True:
            verdict = checker.judge(await read_cluster(self.url), self._key(), self.priorities)
            # A preemptor unbound for now is on its way: only the final verdict says whether it was wasted.
            seen += [v for v in verdict.violations if v.kind not in priority_mix.JUDGED_AT_THE_END]
            if not verdict.unconverged:
                return verdict, time.monotonic(), seen
            if time.monotonic() > deadline:
                return verdict, None, seen
            await asyncio.sleep(1.0)  # the checker's polling period

    async def _api_faults(self) -> dict[str, int]:
        async with aiohttp.ClientSession() as session, session.get(f"{self.url}/debug/faults") as response:
            report = await response.json()
        injected: dict[str, int] = report.get("injected", {})
        return {"considered": int(report.get("considered", 0)), **{k: injected.get(k, 0) for k in API_FAULT_KINDS}}


def _samples(violations: Iterable[checker.Violation], per_kind: int = 5) -> tuple[checker.Violation, ...]:
    """The first few violations of each kind, so that a frequent kind does not hide a rare one."""
    taken: dict[str, list[checker.Violation]] = {}
    for violation in violations:
        kept = taken.setdefault(violation.kind, [])
        if len(kept) < per_kind:
            kept.append(violation)
    return tuple(v for kept in taken.values() for v in kept)


async def run_chaos(options: ChaosOptions) -> ChaosReport:
    return await ChaosRun(options).run()
