"""The bounded branch-and-bound equals exhaustive enumeration, and respects its work bound."""

from __future__ import annotations

import itertools
import time

import pytest
from engine_builders import dgx1_boards, fixture_node, nvl72, pcie_tree_16
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.model import NodeState
from engine.node.search import best_subset, brute_force
from engine.node.vendors.nvidia.links import pair_table

SCORE_VALUES = (0, 10, 20, 30, 40, 50, 60, 100, 110, 200, 600, 1800)


def _reference(weights: list[list[int]], k: int, degree: list[int] | None, idle: list[bool] | None):
    """Independent of search.py: score every set with itertools and sort by the documented key."""
    n = len(weights)
    ranked = []
    for combo in itertools.combinations(range(n), k):
        internal = sum(weights[a][b] for a, b in itertools.combinations(combo, 2))
        cut = 0
        if degree is not None and idle is not None:
            members = set(combo)
            cut = sum(weights[a][f] for a in combo if idle[a] for f in range(n) if idle[f] and f not in members)
        ranked.append((-internal, cut, combo))
    ranked.sort()
    return ranked[0]


@st.composite
def weight_problems(draw: st.DrawFn, max_n: int = 12) -> tuple[list[list[int]], int, list[bool]]:
    n = draw(st.integers(min_value=1, max_value=max_n))
    k = draw(st.integers(min_value=1, max_value=n))
    palette = draw(st.lists(st.sampled_from(SCORE_VALUES), min_size=1, max_size=4, unique=True))
    weights = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            weights[a][b] = weights[b][a] = draw(st.sampled_from(palette))
    idle = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return weights, k, idle


@st.composite
def block_problems(draw: st.DrawFn) -> tuple[list[list[int]], int, list[bool]]:
    """Boards of NVLinked GPUs joined by one background score: the shape BlockBound is for."""
    n = draw(st.integers(min_value=4, max_value=12))
    k = draw(st.integers(min_value=2, max_value=n))
    board = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    background = draw(st.sampled_from([0, 10, 20]))
    weights = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            inside = draw(st.sampled_from([background, 40, 100, 200, 300]))
            weights[a][b] = weights[b][a] = inside if board[a] == board[b] else background
    idle = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return weights, k, idle


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_problems())
def test_search_equals_brute_force_on_block_topologies(problem) -> None:
    weights, k, idle = problem
    degree = _degrees(weights, idle)
    result = best_subset(weights, k, cut_degree=degree, idle=idle)
    assert result.exact
    assert (-result.best.internal, result.best.cut, result.best.positions) == _reference(weights, k, degree, idle)


def test_eight_boards_of_64_gpus_are_solved_exactly() -> None:
    node = dgx1_boards(8)
    busy = {i for i in range(64) if i % 5 == 2}
    free = [d.index for d in node.devices if d.index not in busy]
    weights = _weights_of(node, free)
    result = best_subset(weights, 8, cut_degree=_degrees(weights, [True] * len(free)), idle=[True] * len(free))
    assert result.exact
    # the best: two whole free quads of two boards, each 9 NVLinks on one NUMA node (900 + 6 x NODE 20 = 1020),
    # and the 16 SYS pairs between them (160). Seven GPUs of one board plus one elsewhere reach only 2170: its
    #  NVLinks between its quads cross NUMA nodes (SYS 10, not NODE 20).
    assert result.best.internal == 2200


def _degrees(weights: list[list[int]], idle: list[bool]) -> list[int]:
    n = len(weights)
    return [sum(weights[a][f] for f in range(n) if f != a and idle[f]) if idle[a] else 0 for a in range(n)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weight_problems())
def test_search_equals_brute_force_on_random_symmetric_topologies(problem) -> None:
    weights, k, idle = problem
    plain = best_subset(weights, k)
    expected = _reference(weights, k, None, None)
    assert plain.exact
    assert (-plain.best.internal, plain.best.cut, plain.best.positions) == expected

    degree = _degrees(weights, idle)
    protected = best_subset(weights, k, cut_degree=degree, idle=idle)
    expected = _reference(weights, k, degree, idle)
    assert protected.exact
    assert (-protected.best.internal, protected.best.cut, protected.best.positions) == expected


def _weights_of(node: NodeState, free: list[int]) -> list[list[int]]:
    links = {(link.src, link.dst): link for link in node.links}
    devices = sorted(node.devices, key=lambda d: d.index)
    table = pair_table(devices, links)
    return [[table.score(a, b) if a != b else 0 for b in free] for a in free]


REAL_NODES = {
    "dgx1-v100": lambda: fixture_node("n", "dgx1-v100"),
    "dgx-h100": lambda: fixture_node("n", "dgx-h100"),
    "pcie-8gpu-2socket": lambda: fixture_node("n", "pcie-8gpu-2socket"),
    "pcie-4gpu": lambda: fixture_node("n", "pcie-4gpu"),
    "pcie-tree-16": pcie_tree_16,
    "2x-dgx1-16": lambda: dgx1_boards(2),
}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(REAL_NODES)), st.data())
def test_search_equals_brute_force_on_real_topologies(name: str, data: st.DataObject) -> None:
    node = REAL_NODES[name]()
    all_indices = sorted(d.index for d in node.devices)
    free = data.draw(st.lists(st.sampled_from(all_indices), min_size=1, unique=True).map(sorted))
    k = data.draw(st.integers(min_value=1, max_value=len(free)))
    weights = _weights_of(node, free)
    idle = [True] * len(free)
    degree = _degrees(weights, idle)
    result = best_subset(weights, k, cut_degree=degree, idle=idle)
    assert result.exact
    assert result.best == brute_force(weights, k, cut_degree=degree, idle=idle)
    assert (-result.best.internal, result.best.cut, result.best.positions) == _reference(weights, k, degree, idle)


def test_cap_returns_the_best_found_and_says_it_is_not_exact() -> None:
    node = dgx1_boards(8)
    free = [d.index for d in node.devices]
    weights = _weights_of(node, free)
    capped = best_subset(weights, 8, cap=50)
    assert not capped.exact
    assert capped.expanded <= 50
    assert len(capped.best.positions) == 8
    assert len(set(capped.best.positions)) == 8
    # the best found is still a real set with its true score
    assert capped.best.internal == sum(weights[a][b] for a, b in itertools.combinations(capped.best.positions, 2))
    # and a full search with room to spare does at least as well
    assert best_subset(weights, 8, cap=10**6).best.internal >= capped.best.internal


def test_nvl72_is_exact_and_fast() -> None:
    node = nvl72()
    free = [d.index for d in node.devices]
    weights = _weights_of(node, free)
    # NV18 through the switches, plus the NUMA node's PCIe level: NODE within a half, SYS across
    assert all(weights[a][b] == (1820 if a // 36 == b // 36 else 1810) for a in range(72) for b in range(72) if a != b)
    for k in (2, 4, 8):
        started = time.perf_counter()
        result = best_subset(weights, k, cut_degree=_degrees(weights, [True] * 72), idle=[True] * 72)
        elapsed = time.perf_counter() - started
        assert result.exact
        assert result.best.positions == tuple(range(k))  # all on one NUMA node: the earliest devices
        assert result.best.internal == 1820 * k * (k - 1) // 2
        assert elapsed < 2.0


def test_bad_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="cannot choose 3 of 2"):
        best_subset([[0, 1], [1, 0]], 3)
