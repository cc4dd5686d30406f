"""The placer's memory: peak RSS of a ClusterView holding 10,000 nodes after 100,000 pods came and went.

Run in a fresh process (`python -m bench.placer_memory --nodes 10000 --pods 100000`),
which prints one JSON object; `measure()` starts that process and reads it.

The view gets what the topics would bring: a NodeTopologyEvent and a NodeStatusEvent
per node (the realistic nodes of bench/realistic_cluster.py: unique names, labels and
GPU UUIDs, allocatable resources), then per pod a PlacementEvent (PLACED, one to eight
GPUs), the binder's BindingEvent BOUND, the cluster's PodLifecycleEvent BOUND and,
later, PodLifecycleEvent DELETED. At most `live` pods hold devices at once (one per
node by default); the engine's index is brought up to date (`view.index()`) every
`index_every` pods, as decisions would. Peak RSS: the process's high-water mark (`_peak_mb`).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence

import msgspec

from bench.realistic_cluster import gpu_pod, realistic_nodes
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    LifecyclePhase,
    NodeStatusEvent,
    NodeTopologyEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from services.placer.view import ClusterView


class MemoryRun(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    pods: int
    peak_rss_mb: float  # the whole run
    rss_after_imports_mb: float  # peak before any event: the interpreter and the imported code
    rss_after_nodes_mb: float  # peak once every node was applied and indexed
    rss_end_mb: float  # current RSS at the end (every pod gone)
    seconds: float
    index_nodes: int  # nodes in the engine's index at the end
    pods_known_end: int  # pods the view still tracks at the end (0: every one forgotten)
    deleted_remembered: int  # uids of deleted pods the view remembers (bounded)


def _peak_mb() -> float:
    """This process's peak RSS. Linux keeps `getrusage`'s ru_maxrss across exec, so a child started by a
    big parent (the benchmark) would report the parent's size: the address space's own high-water mark
    (VmHWM) is read where /proc has it."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def _current_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / (1024.0 * 1024.0)


def drive(nodes: int, pods: int, *, live: int | None = None, index_every: int = 1_000, seed: int = 0) -> MemoryRun:
    after_imports = _peak_mb()
    started = time.perf_counter()
    view = ClusterView()
    uuids = _apply_nodes(view, nodes, seed)
    view.index()
    after_nodes = _peak_mb()
    _stream_pods(view, uuids, pods, capacity=live if live is not None else nodes, index_every=index_every)
    index = view.index()
    sizes = view.sizes()
    return MemoryRun(
        nodes=nodes,
        pods=pods,
        peak_rss_mb=round(_peak_mb(), 1),
        rss_after_imports_mb=round(after_imports, 1),
        rss_after_nodes_mb=round(after_nodes, 1),
        rss_end_mb=round(_current_mb(), 1),
        seconds=round(time.perf_counter() - started, 2),
        index_nodes=len(index),
        pods_known_end=sizes["pods_known"],
        deleted_remembered=sizes["pods_deleted_remembered"],
    )


def _apply_nodes(view: ClusterView, nodes: int, seed: int) -> dict[str, list[str]]:
    """A NodeTopologyEvent and a NodeStatusEvent per realistic node; node -> its GPU UUIDs (the node
    states themselves are dropped on return, as the view holds what it needs)."""
    states = realistic_nodes(nodes, seed)
    for state in states:
        view.apply(
            NodeTopologyEvent(
                node=state.name, machine_type=state.machine_type, devices=state.devices, links=state.links
            )
        )
        view.apply(
            NodeStatusEvent(
                node=state.name,
                labels=state.labels,
                allocatable=state.allocatable or {},
                taints=state.taints,
                ready=state.ready,
                unschedulable=state.unschedulable,
            )
        )
    return {s.name: [d.uuid for d in s.devices] for s in states}


def _stream_pods(view: ClusterView, uuids: dict[str, list[str]], pods: int, *, capacity: int, index_every: int) -> None:
    """`pods` pods placed, bound and deleted in turn, at most `capacity` alive at once; every pod gone at the end."""
    names = sorted(uuids)
    window: deque[PodLifecycleEvent] = deque()
    for n in range(pods):
        bound = _place_and_bind(view, n, names[n % len(names)], uuids)
        window.append(bound)
        if len(window) >= capacity:
            _delete(view, window.popleft())
        if n % index_every == 0:
            view.index()
    while window:
        _delete(view, window.popleft())


def _place_and_bind(view: ClusterView, n: int, node: str, uuids: dict[str, list[str]]) -> PodLifecycleEvent:
    """Pod n's PlacementEvent, BindingEvent and PodLifecycleEvent BOUND on `node` (1-8 GPUs); the last returned."""
    gpus = (1, 1, 2, 4, 8)[n % 5]
    first = (n // len(uuids)) % 8
    devices = tuple(DeviceAssignment(index=(first + k) % 8, uuid=uuids[node][(first + k) % 8]) for k in range(gpus))
    uid = f"pod-{n:07d}"
    requests = gpu_pod(uid, gpus).requests
    decision_id = f"{n:024x}"
    view.apply(
        PlacementEvent(
            decision_id=decision_id,
            uid=uid,
            namespace="team-a",
            name=f"job-{n}",
            pod_resource_version=str(n),
            outcome=PlacementOutcome.PLACED,
            node=node,
            devices=devices,
            requests=requests,
        )
    )
    view.apply(
        BindingEvent(
            decision_id=decision_id,
            uid=uid,
            namespace="team-a",
            name=f"job-{n}",
            outcome=BindingOutcome.BOUND,
            node=node,
            devices=devices,
        )
    )
    bound = PodLifecycleEvent(
        uid=uid,
        namespace="team-a",
        name=f"job-{n}",
        phase=LifecyclePhase.BOUND,
        node=node,
        devices=devices,
        requests=requests,
    )
    view.apply(bound)
    return bound


def _delete(view: ClusterView, bound: PodLifecycleEvent) -> None:
    view.apply(msgspec.structs.replace(bound, phase=LifecyclePhase.DELETED, devices=(), requests={}))


def measure(nodes: int, pods: int, *, timeout_s: float = 600.0) -> MemoryRun:
    """`drive` in a fresh interpreter, so that nothing else of the benchmark counts in its RSS."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.placer_memory", "--nodes", str(nodes), "--pods", str(pods)],
        capture_output=True,
        check=True,
        timeout=timeout_s,
    )
    return msgspec.json.decode(done.stdout.strip().splitlines()[-1], type=MemoryRun)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.placer_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=None, help="pods alive at once (default: one per node)")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 0:
        parser.error("--nodes: at least 1; --pods: not negative")
    run = drive(args.nodes, args.pods, live=args.live)
    print(msgspec.json.encode(run).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
