"""The lookup search (search_table.py) decides exactly as the branch-and-bound it replaces.

Two levels: the NVIDIA plugin's whole per-node answer on random loads and requests
(fixture machines, the bench's synthetic ones, random topologies), compared with the
same call by an engine whose limits turn the lookups off (`Limits(table_search=False)`); and the
table and uniform answers against a full ranking of every set by the documented key, runners-up included.
"""

from __future__ import annotations

import itertools

import pytest
from engine_builders import dgx1_boards, fixture_node, gpu, matrix_links, node, nvl72, pcie_tree_16, pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Allocation, Engine, Limits, Mode, NodeState, PodRequest
from engine.node.answer import NodeFit, NodeMiss
from engine.node.search_table import SubsetTable, table_best, uniform_best
from schemas.topology import PcieLevel

MACHINES = {
    "dgx1-v100": lambda: fixture_node("n", "dgx1-v100"),
    "dgx-h100": lambda: fixture_node("n", "dgx-h100"),
    "pcie-8gpu-2socket": lambda: fixture_node("n", "pcie-8gpu-2socket"),
    "pcie-4gpu": lambda: fixture_node("n", "pcie-4gpu"),
    "pcie-tree-16": pcie_tree_16,
    "2x-dgx1-16": lambda: dgx1_boards(2),
    "nvl72": nvl72,
}
LINK_CHOICES = ((0, PcieLevel.SYS), (0, PcieLevel.NODE), (0, PcieLevel.PIX), (1, PcieLevel.SYS), (2, None), (4, None))


@st.composite
def random_machines(draw: st.DrawFn) -> NodeState:
    """Up to 16 GPUs on two NUMA nodes, each pair drawn from a few link kinds (repeats make ties)."""
    n = draw(st.integers(min_value=2, max_value=16))
    kinds = draw(st.lists(st.sampled_from(LINK_CHOICES), min_size=1, max_size=3, unique=True))
    scores = {(a, b): draw(st.sampled_from(kinds)) for a in range(n) for b in range(a + 1, n)}
    return node("n", [gpu(i, numa=i * 2 // n) for i in range(n)], matrix_links(scores))


@st.composite
def loaded(draw: st.DrawFn, machine: st.SearchStrategy[NodeState]) -> NodeState:
    """Some GPUs held whole, some shared by a pod holding part of memory and cores."""
    built = draw(machine)
    allocations = []
    for d in built.devices:
        state = draw(st.sampled_from(("idle", "idle", "whole", "share")))
        if state == "whole":
            allocations.append(Allocation(pod_uid=f"w-{d.index}", index=d.index))
        elif state == "share":
            memory = draw(st.integers(min_value=1, max_value=8)) * d.memory_mib // 10
            cores = draw(st.sampled_from((10, 30, 50)))
            allocations.append(Allocation(pod_uid=f"s-{d.index}", index=d.index, memory_mib=memory, cores=cores))
    return NodeState(
        name=built.name,
        machine_type=built.machine_type,
        devices=built.devices,
        links=built.links,
        allocations=tuple(allocations),
    )


@st.composite
def requests(draw: st.DrawFn, most: int) -> PodRequest:
    count = draw(st.integers(min_value=1, max_value=max(1, min(most, 9))))
    policy = draw(st.sampled_from((None, "binpack", "spread", "topology-aware", "binpack,topology-aware", "numa")))
    if draw(st.booleans()):
        return pod(count, policy=policy)
    return pod(count, policy=policy, gpumem=str(draw(st.sampled_from((1000, 8000)))), gpucores="10")


FAST = Engine(limits=Limits(caches=False))  # the lookups, every answer computed afresh
REFERENCE = Engine(limits=Limits(caches=False, table_search=False))  # the branch-and-bound alone
WARM = Engine()  # the lookups and the memo tables


def _answer(engine: Engine, machine: NodeState, request: PodRequest, mode: Mode) -> NodeFit | NodeMiss:
    claimed = engine.vendors.claim(request)
    assert claimed is not None
    chosen_plugin, device_request = claimed
    assert chosen_plugin is engine.vendors.named("nvidia")
    return engine.node_answers.named(chosen_plugin, device_request, machine, mode)


def _decision(answer: NodeFit | NodeMiss) -> object:
    """Everything of the answer the search decides; runners-up and work counters are checked below."""
    if isinstance(answer, NodeMiss):
        return answer
    choice = answer.choice
    parts = {name: value for name, value in choice.parts.items() if name != "branches"}
    return (choice.assignments, choice.set_score, parts, choice.exact, answer.score, answer.warnings)


def _check_same(machine: NodeState, request: PodRequest, mode: Mode) -> None:
    fast = _answer(FAST, machine, request, mode)
    reference = _answer(REFERENCE, machine, request, mode)
    assert _decision(fast) == _decision(reference)
    warm = _answer(WARM, machine, request, mode)  # the tables kept from an earlier call answer alike
    assert _decision(warm) == _decision(reference)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(MACHINES)), st.data())
def test_same_decisions_on_loaded_real_machines(name: str, data: st.DataObject) -> None:
    machine = data.draw(loaded(st.just(MACHINES[name]())))
    request = data.draw(requests(len(machine.devices)))
    mode = data.draw(st.sampled_from((Mode.DEFAULT, Mode.HAMI)))
    _check_same(machine, request, mode)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_same_decisions_on_loaded_random_machines(data: st.DataObject) -> None:
    machine = data.draw(loaded(random_machines()))
    request = data.draw(requests(len(machine.devices)))
    mode = data.draw(st.sampled_from((Mode.DEFAULT, Mode.HAMI)))
    _check_same(machine, request, mode)


# --- the lookups against every set, ranked by the documented key ------------------------------------------


def _ranking(weights: list[list[int]], k: int, members: list[int], idle: set[int] | None) -> list[tuple[object, ...]]:
    """Every k of `members` (indices into weights, in preference order): (-internal, cut, ranks), best first."""
    n = len(weights)
    out = []
    for ranks in itertools.combinations(range(len(members)), k):
        chosen = {members[r] for r in ranks}
        internal = sum(weights[a][b] for a, b in itertools.combinations(sorted(chosen), 2))
        cut = 0
        if idle is not None:
            cut = sum(weights[a][q] for a in chosen & idle for q in range(n) if q in idle and q not in chosen)
        out.append((-internal, cut, ranks))
    return sorted(out)


def _as_keys(result: object) -> list[tuple[object, ...]]:
    best = result.best  # type: ignore[attr-defined]
    others = result.runners_up  # type: ignore[attr-defined]
    return [(-f.internal, f.cut, f.positions) for f in (best, *others)]


@st.composite
def table_problems(draw: st.DrawFn) -> tuple[list[list[int]], int, list[int], set[int] | None]:
    n = draw(st.integers(min_value=1, max_value=10))
    palette = draw(st.lists(st.sampled_from((0, 10, 40, 100, 110, 200, 1800)), min_size=1, max_size=3, unique=True))
    weights = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            weights[a][b] = weights[b][a] = draw(st.sampled_from(palette))
    members = draw(st.permutations(range(n)).flatmap(lambda order: st.integers(1, n).map(lambda g: order[:g])))
    k = draw(st.integers(min_value=1, max_value=len(members)))
    idle = draw(st.none() | st.sets(st.integers(0, n - 1)))
    return weights, k, list(members), idle


@settings(max_examples=200, deadline=None)
@given(table_problems())
def test_table_answer_and_runners_up_follow_the_key(problem: tuple[list[list[int]], int, list[int], set[int] | None]):
    weights, k, members, idle = problem
    idle_mask = None if idle is None else sum(1 << p for p in idle)
    result = table_best(SubsetTable(weights), k, members, idle_mask)
    ranking = _ranking(weights, k, members, idle)
    assert _as_keys(result) == ranking[:4]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from((0, 10, 1800)),
    st.lists(st.booleans(), min_size=1, max_size=10),
    st.integers(0, 4),
    st.booleans(),
    st.data(),
)
def test_uniform_answer_and_runners_up_follow_the_key(
    score: int, idle_flags: list[bool], idle_elsewhere: int, protect: bool, data: st.DataObject
) -> None:
    """Candidates in preference order, idle or not, plus idle GPUs of the node that are not candidates."""
    g = len(idle_flags)
    k = data.draw(st.integers(min_value=1, max_value=g))
    n = g + idle_elsewhere
    weights = [[score if a != b else 0 for b in range(n)] for a in range(n)]
    idle = {r for r in range(g) if idle_flags[r]} | set(range(g, n))
    result = uniform_best(score, k, idle_flags, len(idle) if protect else None)
    assert _as_keys(result) == _ranking(weights, k, list(range(g)), idle if protect else None)[:4]


def test_table_rejects_more_than_sixteen_devices() -> None:
    with pytest.raises(ValueError, match="at most 16 devices, got 17"):
        SubsetTable([[0] * 17 for _ in range(17)])


def test_bad_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="cannot choose 3 of 2"):
        table_best(SubsetTable([[0, 1], [1, 0]]), 3, [0, 1], None)
    with pytest.raises(ValueError, match="cannot choose 3 of 2"):
        uniform_best(10, 3, [True, True], None)


def test_subset_scores_are_pair_score_sums() -> None:
    weights = [[0, 1, 2, 4], [1, 0, 8, 16], [2, 8, 0, 32], [4, 16, 32, 0]]
    table = SubsetTable(weights)
    for mask in range(16):
        members = [p for p in range(4) if mask >> p & 1]
        assert table.scores[mask] == sum(weights[a][b] for a, b in itertools.combinations(members, 2))
