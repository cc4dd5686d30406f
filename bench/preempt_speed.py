"""Preemption speed at 10,000 nodes, and its victims against every node tried and every subset tried.

Speed: packed clusters (bench/preempt_clusters.py), one Engine for the run; `cold` is the first
preemption (the engine builds its running-pods table and shapes), `warm` the next ones with
preemptors of other sizes over the same cluster, in turn (the engine keeps, per preemptor, what
its search found: a size asked before is read back), and `new preemptor` warm ones each with a
label no earlier preemptor had (one the fit does not read, so the same victims), for which nothing
is kept. The baseline of the same run is the same engine trying every node (`every_node=True`), as
the engine did before and as kube-scheduler would with its sample as large as the cluster; the
calls it answers with another node or other victims are counted (`differing`).

Victims: random clusters of at most 12 nodes; the victims' cost (pickOneNodeForPreemption's order
of the node chosen) against every node tried, and the highest victim priority against the least
any subset of lower-priority pods of any node allows (an exhaustive search, placing the preemptor
on the node rebuilt without them).
"""

from __future__ import annotations

import gc
import itertools
import random
import sys
import time
from collections.abc import Callable, Sequence

import msgspec
import numpy as np

from bench.preempt_clusters import (
    PackedCluster,
    cpu_cluster,
    cpu_preemptor,
    gpu_cluster,
    gpu_gang,
    gpu_preemptor,
    leaf_spine_tree,
)
from bench.results import Figure, SectionReport
from engine import Engine, NodeState, PodRequest, Snapshot
from engine.decide.preempt import Preemption, Preemptor, RunningPod
from engine.decide.preempt.gang import GangPreemption
from engine.decide.preempt.search import node_order_key

TITLE = "Preemption: speed at 10,000 nodes, victims against exhaustive search"


class PreemptSpeed(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # e.g. "cpu_10000"
    cold_ms: float
    warm_ms: tuple[float, ...]
    warm_cpu_ms: tuple[float, ...]  # the warm calls' process CPU time
    new_preemptor_ms: tuple[float, ...]  # warm, each preemptor with a label not asked before
    every_node_ms: tuple[float, ...]  # the baseline: every node tried (warm)
    differing: int  # calls timed for both where the baseline's node or victims differ

    def p99(self, values: Sequence[float]) -> float:
        return float(np.percentile(values, 99))


class GangSpeed(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # e.g. "gang_64x8_10000"
    cold_ms: float  # a fresh engine (the cluster's index built before)
    warm_ms: tuple[float, ...]
    hypernode: str
    victims: int
    hypernodes_tried: int


def measure_gang(nodes: int, members: int, calls: int) -> GangSpeed:
    """A gang of `members` x 8 GPUs, hard inside one spine (128 nodes), on a packed GPU cluster."""
    cluster = gpu_cluster(nodes)
    tree = leaf_spine_tree([n.name for n in cluster.snapshot.nodes])
    engine = Engine()
    index = engine.index_of(cluster.snapshot)
    request = gpu_gang(members)
    gc.collect()  # building the cluster's 10,000 nodes and 30,000 pods is not the preemption's garbage
    cold, first = _timed_gang(lambda: engine.preempt_gang(index, tree, request, 1000, cluster.running))
    warm = [
        _timed_gang(lambda: engine.preempt_gang(index, tree, request, 1000, cluster.running))[0] for _ in range(calls)
    ]
    return GangSpeed(
        name=f"gang_{members}x8_{nodes}",
        cold_ms=cold,
        warm_ms=tuple(warm),
        hypernode=first.hypernode or "",
        victims=len(first.victims),
        hypernodes_tried=first.hypernodes_tried,
    )


def _timed_gang(call: Callable[[], GangPreemption]) -> tuple[float, GangPreemption]:
    t0 = time.perf_counter()
    result = call()
    return 1000.0 * (time.perf_counter() - t0), result


class VictimCheck(msgspec.Struct, frozen=True, kw_only=True):
    clusters: int
    preempted: int
    same_cost_as_every_node: int
    same_top_priority_as_subsets: int


def _timed(call: Callable[[], Preemption], cpu: list[float] | None = None) -> tuple[float, Preemption]:
    """The call's wall time in ms (and its process CPU time appended to `cpu`: on a shared machine the wall
    time also counts the waits for a core)."""
    c0, t0 = time.process_time(), time.perf_counter()
    result = call()
    wall = 1000.0 * (time.perf_counter() - t0)
    if cpu is not None:
        cpu.append(1000.0 * (time.process_time() - c0))
    return wall, result


def measure_speed(
    name: str, cluster: PackedCluster, make: Callable[[int], Preemptor], calls: int, baseline_calls: int
) -> PreemptSpeed:
    engine = Engine()
    snapshot, running = cluster.snapshot, cluster.running
    cold, _ = _timed(lambda: engine.preempt(snapshot, make(0), running))
    # The cluster's objects (30,000 pods, 10,000 nodes) and the cold call's tables survive into the oldest
    # generation: a full collection of them (~200 ms at 10,000 GPU nodes) is the process's, not a preemption's.
    gc.collect()
    warm: list[float] = []
    warm_cpu: list[float] = []
    answers: list[Preemption] = []
    for j in range(1, calls + 1):
        ms, result = _timed(lambda j=j: engine.preempt(snapshot, make(j), running), warm_cpu)  # type: ignore[misc]
        warm.append(ms)
        answers.append(result)
    fresh: list[float] = []
    for j in range(1, calls + 1):
        pod = make(j)
        pod = msgspec.structs.replace(pod, request=msgspec.structs.replace(pod.request, labels={"run": str(j)}))
        fresh.append(_timed(lambda pod=pod: engine.preempt(snapshot, pod, running))[0])  # type: ignore[misc]
    every: list[float] = []
    differing = 0
    for j in range(1, baseline_calls + 1):
        ms, result = _timed(lambda j=j: engine.preempt(snapshot, make(j), running, every_node=True))  # type: ignore[misc]
        every.append(ms)
        differing += (result.node, result.victims) != (answers[j - 1].node, answers[j - 1].victims)
    return PreemptSpeed(
        name=name,
        cold_ms=cold,
        warm_ms=tuple(warm),
        warm_cpu_ms=tuple(warm_cpu),
        new_preemptor_ms=tuple(fresh),
        every_node_ms=tuple(every),
        differing=differing,
    )


def _small_cluster(rng: random.Random) -> tuple[tuple[NodeState, ...], list[RunningPod], Preemptor]:
    """Up to 12 nodes of 8 CPUs, each full with pods of 1-4 CPUs, some nodes copies of others."""
    nodes: list[NodeState] = []
    pods: list[RunningPod] = []
    for n in range(rng.randint(1, 12)):
        name, used, mine = f"n{n:02d}", 0, []
        while used < 8:
            cpu = min(rng.randint(1, 4), 8 - used)
            used += cpu
            start = float(rng.randint(0, 3))
            prio = rng.choice((0, 1, 2, 5))
            mine.append(
                RunningPod(
                    name=f"{name}-{len(mine)}", node=name, priority=prio, start_time=start, requests={"cpu": str(cpu)}
                )
            )
        pods.extend(mine)
        nodes.append(
            NodeState(name=name, allocatable={"cpu": "8", "pods": "20"}, requested={"cpu": "8"}, pods=len(mine))
        )
    request = PodRequest(uid="pre", name="pre", requests={"cpu": str(rng.randint(1, 6))})
    return tuple(nodes), pods, Preemptor(request=request, priority=rng.choice((1, 3, 6)))


def _least_top_priority(engine: Engine, nodes: Sequence[NodeState], pods: Sequence[RunningPod], pod: Preemptor) -> int:
    """The least highest-victim priority over every subset of every node's lower-priority pods that makes room."""
    least = sys.maxsize
    for node in nodes:
        lower = [p for p in pods if p.node == node.name and p.priority < pod.priority]
        for size in range(1, len(lower) + 1):
            for subset in itertools.combinations(lower, size):
                top = max(p.priority for p in subset)
                if top >= least:
                    continue
                freed = sum(int(p.requests["cpu"]) for p in subset)
                rebuilt = msgspec.structs.replace(node, requested={"cpu": str(8 - freed)}, pods=node.pods - size)
                if engine.place(Snapshot(nodes=(rebuilt,)), pod.request).node is not None:
                    least = top
    return least


def check_victims(clusters: int, seed: int = 7) -> VictimCheck:
    rng = random.Random(seed)
    engine = Engine()
    preempted = same_cost = same_top = 0
    for _ in range(clusters):
        nodes, pods, pod = _small_cluster(rng)
        snapshot = Snapshot(nodes=nodes)
        fast = engine.preempt(snapshot, pod, pods)
        every = engine.preempt(snapshot, pod, pods, every_node=True)
        if every.node is None:
            same_cost += fast.node is None
            continue
        preempted += 1
        if fast.node is not None and node_order_key(fast.candidates[0]) == node_order_key(every.candidates[0]):
            same_cost += 1
        if fast.victims and max(v.priority for v in fast.victims) == _least_top_priority(engine, nodes, pods, pod):
            same_top += 1
    return VictimCheck(
        clusters=clusters, preempted=preempted, same_cost_as_every_node=same_cost, same_top_priority_as_subsets=same_top
    )


# (figure name, cluster, preemptor, warm calls, baseline calls): the short profile's sizes
SpeedRun = tuple[str, Callable[[], PackedCluster], Callable[[int], Preemptor], int, int]
SPEED_RUNS: tuple[SpeedRun, ...] = (
    ("cpu_10000", lambda: cpu_cluster(10_000), cpu_preemptor, 200, 3),
    ("gpu_1000", lambda: gpu_cluster(1_000), gpu_preemptor, 100, 3),
    ("gpu_10000", lambda: gpu_cluster(10_000), gpu_preemptor, 40, 4),
)
SMALL_CLUSTERS = 200
GANG_RUN = (10_000, 64, 5)  # nodes, members of 8 GPUs, warm calls


def figures(speeds: Sequence[PreemptSpeed], victims: VictimCheck, gangs: Sequence[GangSpeed] = ()) -> list[Figure]:
    out: list[Figure] = []
    for g in gangs:
        detail = f"domain {g.hypernode}, {g.victims} victims, {g.hypernodes_tried} hypernodes tried"
        out.append(Figure(name=f"preempt.{g.name}.cold_ms", value=g.cold_ms, unit="ms", detail=detail))
        out.append(Figure(name=f"preempt.{g.name}.warm_max_ms", value=max(g.warm_ms), unit="ms", detail=detail))
    for s in speeds:
        every = {"every_node_p99": s.p99(s.every_node_ms)} if s.every_node_ms else {}
        detail = (
            f"{len(s.warm_ms)} preemptions (CPU time p99 {s.p99(s.warm_cpu_ms):.2f} ms); every node tried on "
            f"{len(s.every_node_ms)}, node or victims differing: {s.differing}"
        )
        out.append(
            Figure(
                name=f"preempt.{s.name}.warm_p99_ms", value=s.p99(s.warm_ms), unit="ms", baselines=every, detail=detail
            )
        )
        out.append(
            Figure(
                name=f"preempt.{s.name}.new_preemptor_p99_ms",
                value=s.p99(s.new_preemptor_ms),
                unit="ms",
                detail=f"{len(s.new_preemptor_ms)} preemptions, each with a label not asked before: nothing kept",
            )
        )
        out.append(
            Figure(
                name=f"preempt.{s.name}.cold_ms",
                value=s.cold_ms,
                unit="ms",
                detail="the first preemption: the running pods by node and their shapes built",
            )
        )
    out.append(
        Figure(
            name="preempt.small.same_cost_as_every_node",
            value=float(victims.same_cost_as_every_node),
            unit="clusters",
            baselines={"clusters": float(victims.clusters)},
            detail=f"{victims.preempted} of {victims.clusters} clusters (<= 12 nodes) preempted",
        )
    )
    out.append(
        Figure(
            name="preempt.small.same_top_priority_as_subsets",
            value=float(victims.same_top_priority_as_subsets),
            unit="clusters",
            baselines={"preempted": float(victims.preempted)},
            detail="the highest victim priority against the least any subset of any node allows",
        )
    )
    return out


def markdown(speeds: Sequence[PreemptSpeed], victims: VictimCheck, gangs: Sequence[GangSpeed] = ()) -> str:
    lines = [
        "| cluster | warm p50 ms | warm p99 ms | warm p99 CPU ms | new preemptor p99 ms | cold ms "
        "| every node tried, p99 ms | differing |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in speeds:
        every = f"{s.p99(s.every_node_ms):.1f}" if s.every_node_ms else "-"
        lines.append(
            f"| {s.name} | {float(np.percentile(s.warm_ms, 50)):.2f} | {s.p99(s.warm_ms):.2f} | "
            f"{s.p99(s.warm_cpu_ms):.2f} | {s.p99(s.new_preemptor_ms):.2f} | {s.cold_ms:.1f} | {every} | "
            f"{s.differing} of {len(s.every_node_ms)} |"
        )
    for g in gangs:
        lines.append(f"| {g.name} (gang) | - | {max(g.warm_ms):.1f} (max) | - | - | {g.cold_ms:.1f} | - | - |")
    lines.append("")
    lines.append(
        f"Small clusters (<= 12 nodes, {victims.clusters}, {victims.preempted} preempted): the victims' cost equal "
        f"to every node tried's in {victims.same_cost_as_every_node}; the highest victim priority the least any "
        f"subset allows in {victims.same_top_priority_as_subsets} of {victims.preempted}."
    )
    return "\n".join(lines)


def run(
    log: Callable[[str], None],
    runs: Sequence[SpeedRun] = SPEED_RUNS,
    small: int = SMALL_CLUSTERS,
    gang: tuple[int, int, int] | None = GANG_RUN,
) -> SectionReport:
    speeds: list[PreemptSpeed] = []
    for name, build, make, calls, baseline in runs:
        speeds.append(measure_speed(name, build(), make, calls, baseline))
        s = speeds[-1]
        log(
            f"preemption {name}: warm p99 {s.p99(s.warm_ms):.2f} ms (CPU {s.p99(s.warm_cpu_ms):.2f} ms), "
            f"new preemptor p99 {s.p99(s.new_preemptor_ms):.2f}"
            f" ms, cold {s.cold_ms:.0f} ms, differing from every node {s.differing} of {len(s.every_node_ms)}"
        )
    gangs = [measure_gang(*gang)] if gang is not None else []
    for g in gangs:
        log(f"gang preemption {g.name}: cold {g.cold_ms:.0f} ms, warm max {max(g.warm_ms):.0f} ms")
    victims = check_victims(small)
    log(f"preemption victims on {small} small clusters: {victims.same_cost_as_every_node} as every node")
    return SectionReport(
        title=TITLE, figures=tuple(figures(speeds, victims, gangs)), markdown=markdown(speeds, victims, gangs)
    )


if __name__ == "__main__":
    report = run(lambda m: print(m, file=sys.stderr))
    print(report.markdown)
