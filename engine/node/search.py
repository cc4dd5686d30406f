"""Bounded branch-and-bound: the k devices with the best pair-score sum.

Finding the k-subset of maximum total pair weight is the dense-k-subgraph
problem (NP-hard), so HAMi enumerates all C(n, k) sets. We search the same
space depth-first in the caller's preference order and prune a branch as soon
as an upper bound on what it can still reach cannot beat the best set found:

    bound(branch) = internal(chosen)
                  + sum of the r largest  [gain(j) + top_{r-1}(j) / 2]
                    over the devices j still allowed,

where gain(j) is j's pair score to the chosen devices and top_{r-1}(j) the sum
of j's r-1 best pair scores to any candidate (the new devices' scores among
themselves, each pair counted from both ends). Identical devices (all NV18
behind one NVSwitch) give equal bounds, so whole symmetric subtrees are cut
at the first tie. A greedy set seeds the incumbent. Two more bounds tighten
it where the plain one is loose: the block bound (search_blocks.py) for nodes
made of boards or sockets, and, when the first FIRST_PASS branches do not
finish, the exact optimum of every smaller size (the "inner" bound).

Order of preference between sets (the key):
  1. higher internal score;
  2. lower `cut`: the pair score between the chosen devices and the idle
     devices left behind (the remainder's loss; all zeros = no preference);
  3. earlier in the caller's order, compared position by position.

Work is bounded: at most `cap` branches are expanded per search. When the cap
is hit the best set found so far is returned with `exact=False`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import msgspec

from engine.core.limits import SEARCH_CAP
from engine.node.search_blocks import BlockBound

DEFAULT_CAP = SEARCH_CAP  # branches expanded per search (an engine's Limits.search_cap)
FIRST_PASS = 2_000  # branches tried with the cheap bound before the inner bounds are computed
RUNNERS_UP = 3
SOLVED_BOUND = 8_192  # solved problems an engine keeps (problem_key)


class Found(msgspec.Struct, frozen=True):
    positions: tuple[int, ...]  # into the caller's candidate order, ascending
    internal: int
    cut: int


class SearchResult(msgspec.Struct, frozen=True, kw_only=True):
    best: Found
    runners_up: tuple[Found, ...] = ()
    exact: bool = True
    expanded: int = 0


def _better(a: Found, b: Found) -> bool:
    if a.internal != b.internal:
        return a.internal > b.internal
    if a.cut != b.cut:
        return a.cut < b.cut
    return a.positions < b.positions


def _sort_key(f: Found) -> tuple[int, int, tuple[int, ...]]:
    return (-f.internal, f.cut, f.positions)


class _Search:
    def __init__(
        self,
        weights: Sequence[Sequence[int]],
        k: int,
        cut_degree: Sequence[int],
        idle: Sequence[bool],
        cap: int,
    ) -> None:
        self.w = weights
        self.n = len(weights)
        self.k = k
        self.deg = cut_degree
        self.idle = idle
        self.cap = cap
        self.expanded = 0
        self.exact = True
        # half_top[j][m] = (sum of the m largest weights of row j) / 2, as a float bound
        self.half_top: list[list[float]] = []
        for j in range(self.n):
            row = sorted((weights[j][i] for i in range(self.n) if i != j), reverse=True)
            acc = [0.0]
            for value in row[: max(k - 1, 0)]:
                acc.append(acc[-1] + value / 2)
            self.half_top.append(acc)
        self.best: Found | None = None
        self.seen: list[Found] = []
        # best_inner[m]: an upper bound on the pair-score sum of any m candidates (None = unknown);
        # filled by solve_inner_bounds() from smaller searches on the same matrix.
        self.best_inner: list[float | None] = [0.0, 0.0] + [None] * max(k - 1, 0)
        self._blocks: BlockBound | None = None  # built on first need: most searches end before

    # --- evaluation -----------------------------------------------------------------------

    def evaluate(self, positions: tuple[int, ...]) -> Found:
        internal = 0
        internal_idle = 0
        for x, a in enumerate(positions):
            for b in positions[x + 1 :]:
                internal += self.w[a][b]
                if self.idle[a] and self.idle[b]:
                    internal_idle += self.w[a][b]
        cut = sum(self.deg[a] for a in positions) - 2 * internal_idle
        return Found(positions, internal, cut)

    def offer(self, found: Found) -> None:
        if self.best is None or _better(found, self.best):
            if self.best is not None:
                self._remember(self.best)
            self.best = found
        elif found != self.best:
            self._remember(found)

    def _remember(self, found: Found) -> None:
        if found in self.seen:
            return
        self.seen.append(found)
        self.seen.sort(key=_sort_key)
        del self.seen[RUNNERS_UP:]

    # --- greedy seed ----------------------------------------------------------------------

    def greedy(self) -> None:
        for seed in range(self.n - self.k + 1):
            chosen = [seed]
            gain = list(self.w[seed])
            while len(chosen) < self.k:
                pick = max(
                    (j for j in range(seed + 1, self.n) if j not in chosen),
                    key=lambda j: (gain[j], -self.deg[j], -j),
                )
                chosen.append(pick)
                for j in range(self.n):
                    gain[j] += self.w[pick][j]
            self.offer(self.evaluate(tuple(sorted(chosen))))

    # --- branch and bound -----------------------------------------------------------------

    def solve_inner_bounds(self) -> None:
        """best_inner[m] for 2 <= m < k: the optimum of m devices, from smaller searches.

        The smaller searches spend this search's budget; one that runs out leaves its
        size unknown (None), so the bound stays valid."""
        for m in range(2, self.k):
            sub = _Search(self.w, m, [0] * self.n, [False] * self.n, self.cap - self.expanded)
            sub.best_inner = self.best_inner[: m + 1]
            sub.run(escalate=False)
            self.expanded += sub.expanded
            if not sub.exact or sub.best is None:
                break
            self.best_inner[m] = float(sub.best.internal)

    def run(self, escalate: bool = True) -> None:
        """Search with the cheap bound first; if that does not finish within FIRST_PASS
        branches, add the inner bounds and search again, keeping the incumbent."""
        if self.k == 0:
            self.best = Found((), 0, 0)
            return
        self.greedy()
        full_cap = self.cap
        if escalate and self.k >= 3:
            self.cap = min(full_cap, FIRST_PASS)
        self._branch((), 0, 0, [0] * self.n, 0)
        if self.exact or self.cap == full_cap:
            return
        self.cap = full_cap
        self.exact = True
        self.solve_inner_bounds()
        if self.expanded >= self.cap:
            self.exact = False
            return
        self._branch((), 0, 0, [0] * self.n, 0)

    def _branch(self, chosen: tuple[int, ...], start: int, internal: int, gain: list[int], deg_sum: int) -> None:
        r = self.k - len(chosen)
        if r == 0:
            self.offer(self.evaluate(chosen))
            return
        if self.expanded >= self.cap:
            self.exact = False
            return
        self.expanded += 1
        last = self.n - r  # the first new device may sit at most here
        if not self._may_beat(chosen, start, internal, gain, deg_sum, r):
            return
        # Children in any order keep the answer (the key decides, not the visit order);
        # the most promising first finds a strong incumbent early and prunes more.
        for j in sorted(range(start, last + 1), key=lambda j: (-gain[j], self.deg[j], j)):
            row = self.w[j]
            next_gain = [g + row[i] for i, g in enumerate(gain)]
            self._branch(chosen + (j,), j + 1, internal + gain[j], next_gain, deg_sum + self.deg[j])
            if not self.exact:
                return

    def _may_beat(
        self, chosen: tuple[int, ...], start: int, internal: int, gain: list[int], deg_sum: int, r: int
    ) -> bool:
        best = self.best
        assert best is not None  # the greedy seed always sets one
        potentials = (gain[j] + self.half_top[j][r - 1] for j in range(start, self.n))
        bound = internal + sum(heapq.nlargest(r, potentials))
        inner = self.best_inner[r]
        if inner is not None and bound >= best.internal:
            # the r new devices: their best gains to the chosen ones, plus the best any r can
            # score among themselves (tight where devices cluster into boards or cliques)
            gains = heapq.nlargest(r, (gain[j] for j in range(start, self.n)))
            bound = min(bound, internal + sum(gains) + inner)
        if bound >= best.internal:
            if self._blocks is None:
                self._blocks = BlockBound(self.w, self.k)
            if self._blocks.active:
                bound = min(bound, self._blocks.bound(len(chosen), internal, gain, start, r))
        if bound < best.internal:
            return False
        if bound >= best.internal + 1:
            return True  # may still win on internal score (scores are integers)
        # Only a tie on internal score can come from here: bound the cut from below.
        # cut = sum(deg) - 2 * (idle pairs' score) >= sum(deg) - 2 * internal.
        smallest = heapq.nsmallest(r, (self.deg[j] for j in range(start, self.n)))
        cut_bound = max(0, deg_sum + sum(smallest) - 2 * best.internal)  # a cut is never negative
        if cut_bound > best.cut:
            return False
        if cut_bound < best.cut:
            return True
        # Equal on both keys: only an earlier position tuple can still win.
        return chosen <= best.positions[: len(chosen)]


def best_subset(
    weights: Sequence[Sequence[int]],
    k: int,
    *,
    cut_degree: Sequence[int] | None = None,
    idle: Sequence[bool] | None = None,
    cap: int = DEFAULT_CAP,
) -> SearchResult:
    """The best k positions of a symmetric integer weight matrix (see the module docstring).

    `cut_degree[j]`: pair score from candidate j to every idle device of the node
    except itself (0 when j is not idle); `idle[j]`: whether j is idle. Without
    them the remainder plays no part and ties go to the earliest positions.
    """
    n = len(weights)
    if not 0 <= k <= n:
        raise ValueError(f"cannot choose {k} of {n} devices")
    return _solve(weights, k, cut_degree, idle, cap)


def problem_key(
    weights: Sequence[Sequence[int]],
    k: int,
    cut_degree: Sequence[int] | None,
    idle: Sequence[bool] | None,
    cap: int,
) -> tuple[object, ...]:
    """Everything `best_subset`'s answer depends on: nodes of one machine type with different loads often
    pose the very same problem (every pair NV18 behind one NVSwitch), so callers memoise by it."""
    return (tuple(tuple(row) for row in weights), k, _frozen(cut_degree), _frozen(idle), cap)


def _frozen(values: Sequence[int] | Sequence[bool] | None) -> tuple[int | bool, ...] | None:
    return None if values is None else tuple(values)


def _solve(
    weights: Sequence[Sequence[int]],
    k: int,
    cut_degree: Sequence[int] | None,
    idle: Sequence[bool] | None,
    cap: int,
) -> SearchResult:
    n = len(weights)
    search = _Search(
        weights,
        k,
        cut_degree if cut_degree is not None else [0] * n,
        idle if idle is not None else [False] * n,
        cap,
    )
    search.run()
    assert search.best is not None
    return SearchResult(
        best=search.best,
        runners_up=tuple(search.seen),
        exact=search.exact,
        expanded=search.expanded,
    )


def brute_force(
    weights: Sequence[Sequence[int]],
    k: int,
    *,
    cut_degree: Sequence[int] | None = None,
    idle: Sequence[bool] | None = None,
) -> Found:
    """Every C(n, k) set, same key: the reference the branch-and-bound must equal."""
    import itertools

    n = len(weights)
    search = _Search(weights, k, cut_degree or [0] * n, idle or [False] * n, cap=0)
    best: Found | None = None
    for positions in itertools.combinations(range(n), k):
        found = search.evaluate(positions)
        if best is None or _better(found, best):
            best = found
    assert best is not None
    return best
