"""Preemption's properties on random small clusters, and its victims against an exhaustive search.

Each cluster has up to six nodes of two NVLink quads and 4 CPUs, each with up to four running pods
(random priority, CPU, GPUs, start time, a label a budget may select). The exhaustive search tries
every subset of every node's lower-priority pods, placing the preemptor with the engine on the node
rebuilt without them (not through the preemption code).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import msgspec
from engine_builders import ENGINE
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from preempt_builders import built_node, preemptor, running

from engine import Engine, NodeState, Snapshot
from engine.decide.preempt import DisruptionBudget, Preemption, Preemptor, RunningPod
from schemas.events.network import LabelSelector

NODES = ("a", "b", "c", "d", "e", "f")


class Cluster:
    def __init__(self, pods: list[RunningPod], gpus: dict[str, tuple[int, ...]], names: Sequence[str]) -> None:
        self.pods, self.gpus, self.names = pods, gpus, names

    def nodes(self, without: Sequence[RunningPod] = ()) -> list[NodeState]:
        gone = {p.key for p in without}
        left = [p for p in self.pods if p.key not in gone]
        return [built_node(n, left, devices=True, gpus=self.gpus) for n in self.names]

    def node(self, name: str, without: Sequence[RunningPod] = ()) -> NodeState:
        return next(n for n in self.nodes(without) if n.name == name)


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    names = NODES[: draw(st.integers(1, 6))]
    pods: list[RunningPod] = []
    gpus: dict[str, tuple[int, ...]] = {}
    for node in names:
        free_cpu, free_gpus = 4, list(range(8))
        for i in range(draw(st.integers(1, 4))):
            cpu = min(draw(st.integers(0, 2) if i else st.integers(1, 2)), free_cpu)
            count = min(draw(st.integers(0, 4)), len(free_gpus))
            held = tuple(sorted(draw(st.permutations(free_gpus))[:count]))
            free_cpu -= cpu
            free_gpus = [g for g in free_gpus if g not in held]
            name = f"{node}{i}"
            gpus[name] = held
            pods.append(
                running(
                    name,
                    node,
                    prio=draw(st.integers(0, 4)),
                    start=draw(st.sampled_from([None, 1.0, 2.0, 3.0])),
                    cpu=str(cpu) if cpu else "",
                    gpus=held,
                    labels={"app": "db"} if draw(st.booleans()) else {},
                )  # fmt: skip
            )
    return Cluster(pods, gpus, names)


preemptors = st.builds(
    lambda prio, cpu, gpus: preemptor(prio, cpu=str(cpu) if cpu else "", gpus=gpus),
    st.one_of(st.integers(3, 5), st.integers(0, 5)),
    st.integers(0, 4),
    st.one_of(st.integers(2, 8), st.integers(0, 8)),
)
budgets = st.lists(
    st.builds(
        lambda allowed: DisruptionBudget(
            name="db", selector=LabelSelector(match_labels={"app": "db"}), disruptions_allowed=allowed
        ),
        st.integers(0, 2),
    ),
    max_size=1,
)


def _preempt(cluster: Cluster, pod: Preemptor, pdbs: Sequence[DisruptionBudget] = ()) -> Preemption:
    return ENGINE.preempt(Snapshot(nodes=tuple(cluster.nodes())), pod, cluster.pods, pdbs)


def _fits_nowhere(cluster: Cluster, pod: Preemptor) -> bool:
    return ENGINE.place(Snapshot(nodes=tuple(cluster.nodes())), pod.request).node is None


def _place(cluster: Cluster, name: str, pod: Preemptor, without: Sequence[RunningPod]) -> tuple[float, float] | None:
    """(set score, remainder loss) of the preemptor on the node without those pods, or None: no fit."""
    decision = ENGINE.place(Snapshot(nodes=(cluster.node(name, without),)), pod.request)
    if decision.node is None:
        return None
    return decision.score_parts.get("set_score", 0.0), decision.score_parts.get("remainder_loss", 0.0)


@settings(max_examples=150, deadline=None)
@given(clusters(), preemptors, budgets)
def test_victims_are_lower_priority_and_the_preemptor_then_fits(
    cluster: Cluster, pod: Preemptor, pdbs: list[DisruptionBudget]
) -> None:
    result = _preempt(cluster, pod, pdbs)
    if result.node is None:
        return
    by_key = {p.key: p for p in cluster.pods}
    gone = [by_key[v.pod] for v in result.victims]
    assert all(p.priority < pod.priority for p in gone)
    assert all(p.node == result.node for p in gone)
    assert _place(cluster, result.node, pod, gone) is not None
    assert result.decision is not None and result.decision.node == result.node


@settings(max_examples=80, deadline=None)
@given(clusters(), preemptors, budgets, st.randoms(use_true_random=False))
def test_same_input_same_victims(
    cluster: Cluster, pod: Preemptor, pdbs: list[DisruptionBudget], rng: random.Random
) -> None:
    first = _preempt(cluster, pod, pdbs)
    shuffled = list(cluster.pods)
    rng.shuffle(shuffled)
    again = Engine().preempt(Snapshot(nodes=tuple(reversed(cluster.nodes()))), pod, shuffled, pdbs)
    assert (again.node, again.victims, again.reason) == (first.node, first.victims, first.reason)


def _feasible_subsets(
    cluster: Cluster, name: str, pod: Preemptor
) -> list[tuple[list[RunningPod], tuple[float, float]]]:
    lower = [p for p in cluster.pods if p.node == name and p.priority < pod.priority]
    found: list[tuple[list[RunningPod], tuple[float, float]]] = []
    for size in range(len(lower) + 1):
        for subset in itertools.combinations(lower, size):
            placed = _place(cluster, name, pod, subset)
            if placed is not None:
                found.append((list(subset), placed))
    return found


@settings(max_examples=120, deadline=None)
@given(clusters(), preemptors)
def test_victims_against_an_exhaustive_search(cluster: Cluster, pod: Preemptor) -> None:
    assume(_fits_nowhere(cluster, pod))
    result = _preempt(cluster, pod)
    feasible = {name: _feasible_subsets(cluster, name, pod) for name in cluster.names}
    # a preemption exactly when some node has some set of lower-priority pods whose eviction makes room
    assert (result.node is not None) == any(feasible.values())
    event("preempted" if result.node is not None else "no preemption")
    if result.node is None:
        return
    by_key = {p.key: p for p in cluster.pods}
    gone = [by_key[v.pod] for v in result.victims]
    ours = _place(cluster, result.node, pod, gone)
    assert ours is not None
    event(f"{len(gone)} victim(s)")
    options = feasible[result.node]
    # the best link score any eviction there gives, and among those the least broken idle score
    best = max(options, key=lambda o: (o[1][0], -o[1][1]))[1]
    assert ours[0] == best[0]
    assert ours[1] == min(o[1][1] for o in options if o[1][0] == best[0])
    # no victim could have stayed
    for victim in gone:
        spared = _place(cluster, result.node, pod, [p for p in gone if p is not victim])
        assert spared is None or spared[0] < ours[0] or spared[1] > ours[1]
    if pod.request.requests.get("nvidia.com/gpu") is None:
        # kube's reprieve evicts no pod more important than it must: the lowest highest victim priority
        # any node allows (no budgets here, so that is the first criterion of the node choice)
        lowest = min(max((p.priority for p in s), default=-1) for opts in feasible.values() for s, _ in opts)
        assert max(p.priority for p in gone) == lowest


@st.composite
def repeated_clusters(draw: st.DrawFn) -> Cluster:
    """Up to six nodes, several of them copies of another's pods with other start times: nodes of one shape."""
    base = draw(clusters())
    pods, gpus = list(base.pods), dict(base.gpus)
    names = list(base.names)
    for copy in NODES[len(names) :][: draw(st.integers(0, 6 - len(names)))]:
        source = draw(st.sampled_from(base.names))
        for pod in [p for p in base.pods if p.node == source]:
            name = copy + pod.name[1:]
            start = draw(st.sampled_from([None, 1.0, 2.0, 3.0]))
            pods.append(msgspec.structs.replace(pod, name=name, node=copy, holder=f"uid-{name}", start_time=start))
            gpus[name] = base.gpus[pod.name]
        names.append(copy)
    return Cluster(pods, gpus, names)


@settings(max_examples=150, deadline=None)
@given(repeated_clusters(), preemptors, budgets)
def test_the_nodes_that_can_win_give_what_every_node_gives(
    cluster: Cluster, pod: Preemptor, pdbs: list[DisruptionBudget]
) -> None:
    """One node tried per shape, and only the shapes whose bound can still win: the answer of every node."""
    assume(_fits_nowhere(cluster, pod))
    snapshot = Snapshot(nodes=tuple(cluster.nodes()))
    fast = Engine().preempt(snapshot, pod, cluster.pods, pdbs)
    every = Engine().preempt(snapshot, pod, cluster.pods, pdbs, every_node=True)
    event("preempted" if every.node is not None else "no preemption")
    assert (fast.node, fast.victims, fast.reason, fast.budget_violations) == (
        every.node,
        every.victims,
        every.reason,
        every.budget_violations,
    )
    assert fast.decision == every.decision
    assert fast.count_only == every.count_only


@settings(max_examples=100, deadline=None)
@given(repeated_clusters(), st.lists(preemptors, min_size=1, max_size=4), budgets)
def test_preemptors_one_after_another_on_one_cluster_give_what_every_node_gives(
    cluster: Cluster, pods: list[Preemptor], pdbs: list[DisruptionBudget]
) -> None:
    """One engine, one cluster, several preemptors, the first asked again last under another name: what
    the search keeps per preemptor (its walk, each shape's victims) answers as every node tried afresh."""
    first = pods[0]
    pods = [*pods, msgspec.structs.replace(first, request=msgspec.structs.replace(first.request, uid="u2", name="n2"))]
    snapshot = Snapshot(nodes=tuple(cluster.nodes()))
    engine = Engine()
    for pod in pods:
        if not _fits_nowhere(cluster, pod):
            continue
        fast = engine.preempt(snapshot, pod, cluster.pods, pdbs)
        every = Engine().preempt(snapshot, pod, cluster.pods, pdbs, every_node=True)
        assert (fast.node, fast.victims, fast.reason, fast.decision) == (
            every.node,
            every.victims,
            every.reason,
            every.decision,
        )
