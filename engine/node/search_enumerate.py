"""Best sets by enumeration: every k of the candidates, scored incrementally on the pair table.

Where the sets are few (`enumerable`: C(g, k) small against g^2) walking all of them costs less than
the branch-and-bound's bounds (search.py) or building a node's subset table
(search_table.py), and needs nothing kept per topology. The walk is depth-first in
the caller's order, so sets come in lexicographic order of their positions; each
prefix carries its pair-score sum, its idle devices' pair-score sum and their cut
degrees, and one row sum per device extends it (no set is scored from scratch).

The key is search.py's: higher internal score, lower cut (the pair score between the
set's idle devices and the idle devices left behind), earlier in the caller's order.
Like the table, it reports the true runners-up (the next sets by the key).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from math import comb

from engine.node.search import RUNNERS_UP, Found, SearchResult

# Measured on bench/search_speed.py's per-node problems (a shared 2-core machine, ratios of one run): the walk
# costs about 0.05-0.3 us a set per chosen device, the branch-and-bound's bounds about g^2 of set-up and more.
# The walk wins while C(g, k) * k <= ENUMERATE_WORK * g^2: dgx1-v100 every k (1.5-6x), 13 free of 16 GPUs
# k <= 4 (1.8-10x), 16 of 16 k <= 4 (1.6-9x), 51 free of 64 k <= 3 (3-17x); past it the bounds win
# (13 of 16 k = 5: even, k = 6: 1.3x; 16 of 16 k = 5: 1.2x, k = 8: 11x).
ENUMERATE_WORK = 32

_Key = tuple[int, int, tuple[int, ...]]  # (-internal, cut, positions): smaller is better


def enumerable(g: int, k: int) -> bool:
    """Whether walking every set finds the best k of g candidates sooner than the branch-and-bound."""
    return 0 <= k <= g and comb(g, k) * k <= ENUMERATE_WORK * g * g


class _Walk:
    def __init__(self, rows: Sequence[Sequence[int]], k: int, degree: list[int], idle: list[bool]) -> None:
        self.rows = rows  # rows[x][y]: pair score of candidates x and y (positions in the caller's order)
        self.g = len(rows)
        self.k = k
        self.degree = degree  # pair score of an idle candidate to every idle device of the node but itself
        self.idle = idle
        self.zeros = [0] * self.g
        self.top: list[_Key] = []  # the best RUNNERS_UP + 1 sets so far, best first
        self.floor = -(1 << 62)  # the internal score a set needs to enter a full `top`

    def walk(self, chosen: tuple[int, ...], start: int, internal: int, inner_idle: int, degree_sum: int,
             gain: list[int], gain_idle: list[int]) -> None:  # fmt: skip
        """`gain[x]`: x's pair score to the chosen devices; `gain_idle[x]`: to the chosen idle ones."""
        left = self.k - len(chosen)
        rows, idle = self.rows, self.idle
        if left == 1:
            self._last(chosen, start, internal, inner_idle, degree_sum, gain, gain_idle, self.zeros, self.zeros)
            return
        if left == 2:  # the last device's gains are summed in place: no list per set of k - 1
            for x in range(start, self.g - 1):
                row = rows[x]
                if idle[x]:
                    self._last(chosen + (x,), x + 1, internal + gain[x], inner_idle + gain_idle[x],
                               degree_sum + self.degree[x], gain, gain_idle, row, row)  # fmt: skip
                else:
                    self._last(chosen + (x,), x + 1, internal + gain[x], inner_idle, degree_sum, gain, gain_idle,
                               row, self.zeros)  # fmt: skip
            return
        for x in range(start, self.g - left + 1):
            row = rows[x]
            next_gain = [a + b for a, b in zip(gain, row, strict=True)]
            if idle[x]:
                next_idle = [a + b for a, b in zip(gain_idle, row, strict=True)]
                self.walk(chosen + (x,), x + 1, internal + gain[x], inner_idle + gain_idle[x],
                          degree_sum + self.degree[x], next_gain, next_idle)  # fmt: skip
            else:
                self.walk(chosen + (x,), x + 1, internal + gain[x], inner_idle, degree_sum, next_gain, gain_idle)

    def _last(self, chosen: tuple[int, ...], start: int, internal: int, inner_idle: int, degree_sum: int,
              gain: list[int], gain_idle: list[int], row: Sequence[int], row_idle: Sequence[int]) -> None:  # fmt: skip
        """Every set `chosen` + (x,) for x from `start`; `row`/`row_idle` add the last chosen device's gains."""
        top, idle, degree = self.top, self.idle, self.degree
        for x in range(start, self.g):
            total = internal + gain[x] + row[x]
            if total < self.floor:
                continue
            if idle[x]:
                cut = degree_sum + degree[x] - 2 * (inner_idle + gain_idle[x] + row_idle[x])
            else:
                cut = degree_sum - 2 * inner_idle
            key = (-total, cut, chosen + (x,))
            if len(top) > RUNNERS_UP:
                if key >= top[-1]:
                    continue
                top.pop()
            bisect.insort(top, key)
            if len(top) > RUNNERS_UP:
                self.floor = -top[-1][0]


def enumerate_best(
    scores: Sequence[Sequence[int]], members: Sequence[int], k: int, idle_positions: Sequence[int] | None
) -> SearchResult:
    """The best k of `members` (positions of the pair table `scores`, in the caller's order) by search.py's key.

    `idle_positions`: the node's idle devices (table positions) whose links the remainder keeps;
    None = the remainder plays no part (cut 0). Positions in the answer index `members`."""
    g = len(members)
    if not 0 <= k <= g:
        raise ValueError(f"cannot choose {k} of {g} devices")
    if k == 0:
        return SearchResult(best=Found((), 0, 0))
    # the table's own rows where the candidates are all its devices in table order (a whole idle node)
    rows = scores if list(members) == list(range(len(scores))) else [[scores[p][q] for q in members] for p in members]
    if idle_positions is None:
        idle = [False] * g
        degree = [0] * g
    else:
        idle_set = set(idle_positions)
        idle = [p in idle_set for p in members]
        degree = [_degree(scores[p], p, idle_positions, idle_set) if idle[x] else 0 for x, p in enumerate(members)]
    if k == g:  # one set (a whole node asked for): no walk
        internal = sum(sum(row[x + 1 :]) for x, row in enumerate(rows))
        if all(idle):
            inner_idle = internal
        else:
            inner_idle = sum(rows[x][y] for x in range(g) if idle[x] for y in range(x + 1, g) if idle[y])
        return SearchResult(best=Found(tuple(range(g)), internal, sum(degree) - 2 * inner_idle), expanded=1)
    walk = _Walk(rows, k, degree, idle)
    walk.walk((), 0, 0, 0, 0, [0] * g, [0] * g)
    found = [Found(positions, -neg_internal, cut) for neg_internal, cut, positions in walk.top]
    return SearchResult(best=found[0], runners_up=tuple(found[1:]), exact=True, expanded=comb(g, k))


def _degree(row: Sequence[int], p: int, idle_positions: Sequence[int], idle_set: set[int]) -> int:
    """Pair score of the device at `p` to every idle device but itself."""
    return sum(map(row.__getitem__, idle_positions)) - (row[p] if p in idle_set else 0)
