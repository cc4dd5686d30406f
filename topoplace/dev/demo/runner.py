"""`topoplace demo`: the whole pipeline on the embedded broker and the test API server.

Starts the broker (or uses KAFKA_BOOTSTRAP), the test Kubernetes API server,
simulated GPU nodes of real machine types under a two-level network tree, and
the collector, placer and binder as separate processes; submits a mixed
workload; shows progress; ends with a table, demo-report.json and the traces.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp
import msgspec
from kubernetes_asyncio import client as k8s
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from schemas import hami, topics
from schemas.annotations import DEVICES, decode_devices
from schemas.events import DeviceAssignment
from topoplace.config import Settings
from topoplace.dev.broker import free_port
from topoplace.dev.demo import cluster as demo_cluster
from topoplace.dev.demo import dra_check, dra_pool, processes, report, workload
from topoplace.dev.demo.tracker import OutcomeTracker
from topoplace.kafka.bootstrap import kafka_bootstrap
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.records import Handler, Received
from topoplace.kube import api_client

NAMESPACE = "default"


class DemoOptions(msgspec.Struct, frozen=True, kw_only=True):
    pods: int = 200
    seed: int = 7
    rate_per_s: float = 50.0  # submission rate
    timeout_s: float = 240.0  # for the pods to end bound or unschedulable
    mode: str = "default"
    report_path: Path = Path("demo-report.json")
    traces_path: Path = Path("demo-traces.jsonl")
    work_dir: Path = Path(".demo")


async def seed_cluster(api: k8s.ApiClient, cluster: demo_cluster.DemoCluster) -> dra_pool.DraSeed:
    core = k8s.CoreV1Api(api)
    custom = k8s.CustomObjectsApi(api)
    for node in cluster.nodes:
        await core.create_node(body=demo_cluster.node_manifest(node))  # type: ignore[arg-type]  # plain dicts are sent as they are
    for hypernode in demo_cluster.hypernode_manifests(cluster):
        await custom.create_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes", body=hypernode)
    resource = k8s.ResourceV1Api(api)
    seed = dra_pool.seed_objects(cluster, NAMESPACE)
    for device_class in seed.device_classes:
        await resource.create_device_class(body=device_class)  # type: ignore[arg-type]  # plain dicts are sent as they are
    for resource_slice in seed.slices:
        await resource.create_resource_slice(body=resource_slice)  # type: ignore[arg-type]  # plain dicts are sent as they are
    for template in seed.templates:
        await resource.create_namespaced_resource_claim_template(NAMESPACE, body=template)  # type: ignore[arg-type]
    return seed


def kubectl_command(url: str) -> str:
    """The one kubectl command that shows the demo's cluster: no kubeconfig, so no credentials or
    namespace of the user's own clusters go to the test API server."""
    return f"kubectl --kubeconfig /dev/null --server {url} get nodes,hypernodes,podgroups,pods -A -o wide"


async def wait_ready(url: str, *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s ({url})")
            await asyncio.sleep(0.2)  # polling a readiness endpoint, as a kubelet probe would


async def wait_nodes_published(bootstrap: str, names: set[str], timeout_s: float) -> None:
    """Until every node's topology and status are on their topics."""
    seen: dict[str, set[str]] = {topics.TOPOLOGY_NODES.name: set(), topics.NODES_STATUS.name: set()}
    done = asyncio.Event()

    async def handle(received: Received) -> None:
        if received.key is not None:
            seen[received.topic].add(received.key)
        if all(names <= s for s in seen.values()):
            done.set()

    async with _following(bootstrap, [topics.TOPOLOGY_NODES, topics.NODES_STATUS], handle):
        try:
            await asyncio.wait_for(done.wait(), timeout_s)
        except TimeoutError as exc:
            missing = {t: sorted(names - s) for t, s in seen.items() if names - s}
            raise TimeoutError(f"nodes not published after {timeout_s:.0f} s: {missing}") from exc


@contextlib.asynccontextmanager
async def _following(bootstrap: str, followed: Sequence[topics.Topic], handler: Handler) -> AsyncIterator[None]:
    """`handler` gets every message of `followed` while the block runs."""
    follower = TopicFollower(bootstrap, followed, service="topoplace-demo")
    task = asyncio.create_task(follower.run(handler))
    try:
        yield
    finally:
        await follower.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def run_demo(options: DemoOptions, settings: Settings, console: Console) -> int:
    started = time.monotonic()
    work = options.work_dir
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("traces-*.jsonl"):
        old.unlink()
    cluster = demo_cluster.default_cluster()
    gang_pods = tuple(pod for gang in workload.GANGS for pod in workload.gang_pods(gang))
    pods = gang_pods + workload.dra_showcase_pods() + workload.generate(options.pods, options.seed)
    children: list[processes.ServiceProcess] = []
    env = processes.with_run_key(
        {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") or k.startswith("OTEL_EXPORTER")}
    )

    # The demo runs its own broker unless KAFKA_BOOTSTRAP names one.
    async with kafka_bootstrap(msgspec.structs.replace(settings, embedded_broker=True)) as bootstrap:
        env["KAFKA_BOOTSTRAP"] = bootstrap
        console.print(f"broker at {bootstrap}")
        try:
            kube_api, url = await processes.start(
                "kube-api", ["kube-api", "serve", "--port", "0"], env=env, log_dir=work, first_line=True
            )
            children.append(kube_api)
            env["TOPOPLACE_KUBE_API_URL"] = url
            console.print(
                f"test Kubernetes API server at {url}; while the demo runs, kubectl shows its cluster:", soft_wrap=True
            )
            console.print(f"  {kubectl_command(url)}", markup=False, highlight=False, soft_wrap=True)
            demo_settings = Settings.from_env(env)
            api = await api_client(demo_settings)
            async with api:
                seed = await seed_cluster(api, cluster)
                console.print(
                    f"{len(cluster.nodes)} nodes ({', '.join(f'{n}× {f}' for f, n in demo_cluster.DEFAULT_MIX)}) "
                    f"under {len(cluster.spines)} spines"
                )
                placer_port = free_port()
                services: list[tuple[str, list[str], dict[str, str]]] = [
                    ("collector-cluster", ["collector", "cluster", "--resync", "60"], {}),
                    ("placer", ["placer", "--mode", options.mode], {"TOPOPLACE_HEALTH_PORT": str(placer_port)}),
                    ("binder", ["binder"], {}),
                ]
                fleet_file = work / "fleet.json"
                fleet_file.write_bytes(msgspec.json.encode(demo_cluster.fleet_of(cluster)))
                services.append(("collector-nodes", ["collector", "fleet", "--fleet", str(fleet_file)], {}))
                for name, args, extra in services:
                    child_env = {
                        **env,
                        "TOPOPLACE_HEALTH_PORT": "0",
                        "TOPOPLACE_TRACES_FILE": str((work / f"traces-{name}.jsonl").resolve()),
                        **extra,
                    }
                    child, _ = await processes.start(name, args, env=child_env, log_dir=work)
                    children.append(child)
                await wait_nodes_published(bootstrap, {n.name for n in cluster.nodes}, timeout_s=90)
                await wait_ready(f"http://127.0.0.1:{placer_port}/readyz", timeout_s=90, what="placer")
                console.print("collectors, placer and binder running; submitting the workload")
                results = await submit_and_track(api, bootstrap, pods, options, settings, children, console)
                dra_summary = await dra_check.check_claims(api, NAMESPACE, seed, results)
        finally:
            for child in reversed(children):
                await processes.stop(child)

    _merge_traces(work, options.traces_path)
    by_trace = report.spans_by_trace([options.traces_path])
    for result in results:
        result.trace_services = tuple(sorted(by_trace.get(result.trace_id, set())))
    demo_report = report.DemoReport(
        cluster_nodes=len(cluster.nodes),
        duration_s=time.monotonic() - started,
        summary=report.summarize(results),
        pods=results,
        dra=dra_summary,
    )
    report.write(demo_report, options.report_path)
    report.render(demo_report, console)
    console.print(f"wrote {options.report_path} and {options.traces_path}; service logs in {work}/")
    s = demo_report.summary
    return 0 if s.unaccounted == 0 and s.pods == len(pods) else 1


def _merge_traces(work: Path, into: Path) -> None:
    """Every service's trace file in one."""
    with into.open("w") as merged:
        for path in sorted(work.glob("traces-*.jsonl")):
            merged.write(path.read_text())


async def submit_and_track(
    api: k8s.ApiClient,
    bootstrap: str,
    pods: tuple[workload.DemoPod, ...],
    options: DemoOptions,
    settings: Settings,
    children: list[processes.ServiceProcess],
    console: Console,
) -> list[report.PodResult]:
    core = k8s.CoreV1Api(api)
    tracker = OutcomeTracker()

    async def handle(received: Received) -> None:
        tracker.apply(received)

    submitted_at: dict[str, float] = {}
    uid_of: dict[str, str] = {}
    custom = k8s.CustomObjectsApi(api)
    for gang in workload.GANGS:
        await custom.create_namespaced_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            NAMESPACE,
            "podgroups",
            workload.podgroup_manifest(gang, namespace=NAMESPACE),
        )
    async with _following(bootstrap, [topics.PLACEMENTS, topics.GANG_PLACEMENTS, topics.BINDINGS], handle):
        with Progress(
            TextColumn("{task.description:<14}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            bars = {
                name: progress.add_task(name, total=len(pods))
                for name in ("submitted", "decided", "bound", "unschedulable")
            }

            def refresh() -> None:
                uids = set(uid_of.values())
                progress.update(bars["submitted"], completed=len(uid_of))
                progress.update(bars["decided"], completed=tracker.final_count(uids))
                progress.update(bars["bound"], completed=tracker.count(uids, "bound"))
                progress.update(bars["unschedulable"], completed=tracker.count(uids, "unschedulable"))

            interval = 1.0 / options.rate_per_s
            for pod in pods:
                created = await core.create_namespaced_pod(
                    NAMESPACE,
                    body=workload.pod_manifest(pod, scheduler_name=settings.scheduler_name),  # type: ignore[arg-type]
                )
                uid_of[pod.name] = created.metadata.uid
                submitted_at[pod.name] = time.time()
                refresh()
                await asyncio.sleep(interval)  # pacing the submissions, not synchronisation
            deadline = time.monotonic() + options.timeout_s
            while tracker.final_count(set(uid_of.values())) < len(pods) and time.monotonic() < deadline:
                if dead := processes.exited(children):
                    raise RuntimeError(f"{dead[0].name} exited early; see {dead[0].log_path}")
                refresh()
                await asyncio.sleep(0.25)  # redraw rate of the progress display
            refresh()

    results = []
    for pod in pods:
        uid = uid_of[pod.name]
        outcome = tracker.by_uid.get(uid)
        result = report.PodResult(name=pod.name, uid=uid, kind=pod.kind, expected_to_fit=pod.expected_to_fit)
        if outcome is not None:
            result.outcome, result.node, result.devices = outcome.outcome, outcome.node, outcome.devices
            result.score, result.reason, result.trace_id = outcome.score, outcome.reason, outcome.trace_id
            result.gang, result.hypernode, result.tier = outcome.gang, outcome.hypernode, outcome.tier
            if outcome.outcome == "bound" and outcome.finished_at is not None:
                result.latency_ms = 1000.0 * (outcome.finished_at - submitted_at[pod.name])
        results.append(result)
    await verify_bound_in_cluster(core, results)
    return results


def enforcement_of(notes: dict[str, str], annotated: tuple[DeviceAssignment, ...]) -> str:
    """ "hami" when HAMi's annotations name exactly our devices' UUIDs, else "advice"."""
    allocated = notes.get(hami.DEVICES_ALLOCATED)
    if allocated is None:
        return "advice"
    uuids = [d.uuid for container in hami.decode_pod_devices(allocated) for d in container]
    return "hami" if uuids == [d.uuid for d in annotated] else "hami (devices differ)"


async def verify_bound_in_cluster(core: k8s.CoreV1Api, results: list[report.PodResult]) -> None:
    """A pod reported bound must be on that node in the API server, with its devices annotated."""
    for result in results:
        if result.outcome != "bound":
            continue
        pod = await core.read_namespaced_pod(result.name, NAMESPACE)
        notes = pod.metadata.annotations or {}
        annotated = decode_devices(notes.get(DEVICES, "[]"))
        if annotated:
            # A pod whose devices come from a DRA claim: the claim's allocation is what the node obeys.
            result.enforcement = "dra" if pod.spec.resource_claims else enforcement_of(notes, annotated)
        if pod.spec.node_name != result.node or tuple(d.index for d in annotated) != result.devices:
            result.outcome = "pending"
            result.reason = (
                f"reported bound to {result.node} {list(result.devices)} but the API server has "
                f"node {pod.spec.node_name!r}, devices {[d.index for d in annotated]}"
            )
