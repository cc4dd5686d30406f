"""The enumerating search (search_enumerate.py) picks exactly what the branch-and-bound picks.

Where the sets are few the NVIDIA plugin walks them all instead of bounding: the same best set
(internal score, cut, then the caller's order) as search.py on random topologies and free sets,
the true runners-up by the documented key, and the choice between the two paths by problem size.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.node.search import best_subset
from engine.node.search_enumerate import ENUMERATE_WORK, enumerable, enumerate_best

PALETTE = (0, 10, 20, 40, 50, 100, 110, 200, 600, 1800)


@st.composite
def free_sets(draw: st.DrawFn, most: int = 20) -> tuple[list[list[int]], list[int], int, list[int] | None]:
    """A node's pair table (repeats make ties), its free GPUs in a preference order, a request, its idle GPUs."""
    n = draw(st.integers(min_value=1, max_value=most))
    palette = draw(st.lists(st.sampled_from(PALETTE), min_size=1, max_size=4, unique=True))
    scores = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            scores[a][b] = scores[b][a] = draw(st.sampled_from(palette))
    order = draw(st.permutations(range(n)))
    members = list(order[: draw(st.integers(min_value=1, max_value=n))])
    k = draw(st.integers(min_value=0, max_value=min(len(members), 5 if len(members) > 12 else len(members))))
    idle = draw(st.none() | st.sets(st.integers(0, n - 1)).map(sorted))
    return scores, members, k, idle


def _branch_and_bound(scores: list[list[int]], members: list[int], k: int, idle: list[int] | None):
    """search.py on the same problem, posed as the NVIDIA plugin poses it."""
    weights = [[scores[p][q] for q in members] for p in members]
    if idle is None:
        return best_subset(weights, k)
    is_idle = [p in idle for p in members]
    degree = [sum(scores[p][q] for q in idle if q != p) if is_idle[x] else 0 for x, p in enumerate(members)]
    return best_subset(weights, k, cut_degree=degree, idle=is_idle)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(free_sets())
def test_enumeration_and_branch_and_bound_pick_the_same_set(
    problem: tuple[list[list[int]], list[int], int, list[int] | None],
) -> None:
    scores, members, k, idle = problem
    walked = enumerate_best(scores, members, k, idle)
    bounded = _branch_and_bound(scores, members, k, idle)
    assert bounded.exact
    assert walked.best == bounded.best  # positions, internal score and cut: the tie-break included
    assert walked.exact


def _ranking(scores: list[list[int]], members: list[int], k: int, idle: list[int] | None) -> list[tuple[object, ...]]:
    """Every k of `members`, scored with itertools alone: (-internal, cut, positions), best first."""
    idle_set = set(idle or ())
    out = []
    for ranks in itertools.combinations(range(len(members)), k):
        chosen = {members[r] for r in ranks}
        internal = sum(scores[a][b] for a, b in itertools.combinations(sorted(chosen), 2))
        cut = 0
        if idle is not None:
            cut = sum(scores[a][q] for a in chosen & idle_set for q in idle_set - chosen)
        out.append((-internal, cut, ranks))
    return sorted(out)


@settings(max_examples=200, deadline=None)
@given(free_sets(most=9))
def test_answer_and_runners_up_follow_the_key(problem: tuple[list[list[int]], list[int], int, list[int] | None]):
    scores, members, k, idle = problem
    result = enumerate_best(scores, members, k, idle)
    keys = [(-f.internal, f.cut, f.positions) for f in (result.best, *result.runners_up)]
    assert keys == _ranking(scores, members, k, idle)[:4]


def test_a_whole_node_is_one_set_with_its_cut() -> None:
    """Eight of eight (a whole-node request): the one set, and what it takes from an idle GPU elsewhere."""
    scores = [[0 if a == b else (100 if a // 4 == b // 4 else 10) for b in range(9)] for a in range(9)]
    result = enumerate_best(scores, list(range(8)), 8, list(range(9)))
    assert result.best.positions == tuple(range(8))
    assert result.best.internal == 2 * 6 * 100 + 16 * 10
    assert result.best.cut == 8 * 10  # every chosen GPU's link to idle GPU 8, left behind
    assert result.runners_up == ()


def test_the_path_is_chosen_by_problem_size() -> None:
    """dgx1-v100: every request enumerates; 64 GPUs: pairs enumerate, larger sets are bounded."""
    assert all(enumerable(8, k) for k in range(9))
    assert enumerable(64, 2)
    assert not enumerable(64, 4)
    assert not enumerable(16, 8)
    assert enumerable(16, 4)
    assert not enumerable(16, 5)
    assert 1820 * 4 <= ENUMERATE_WORK * 16 * 16 < 4368 * 5  # C(16, 4) * 4 and C(16, 5) * 5


def test_bad_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="cannot choose 3 of 2"):
        enumerate_best([[0, 1], [1, 0]], [0, 1], 3, None)
