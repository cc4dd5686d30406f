"""Best sets by lookup: every device subset's pair-score sum, built once per topology.

search.py searches one problem at a time; on a node of at most TABLE_DEVICES
devices it is cheaper to know every answer in advance. `SubsetTable` holds the
pair-score sum of all 2^n subsets of a node's devices (bit p = table position
p), built by doubling: the subsets that add device j are those of devices
0..j-1 plus j's pair scores to their members. Per request size k it also keeps
the k-subsets grouped by score, best first (built on first need).

A query then answers with the same key as search.py (higher internal score,
lower cut, earlier in the caller's order position by position):

  - the first score level holding a subset of the free devices gives the best
    internal score; only that level's free subsets are ranked further (and the
    next levels', until RUNNERS_UP more sets are known);
  - cut(S), the pair score between S's idle devices and the idle devices left
    behind, is three lookups: internal(I) - internal(S & I) - internal(I - S);
  - the caller's order: a sorted tuple of positions is lexicographically first
    exactly when its reversed position mask (bit g-1-r for rank r) is largest.

Uniform nodes (every pair the same score: NVSwitch, a plain PCIe box) need no
table at any size: every set scores the same, the cut depends only on how many
idle devices a set takes, and the earliest sets in the caller's order are
found directly (`uniform_best`).

The runners-up are the true next sets by the key (search.py reports the best
sets its branch-and-bound happened to evaluate, which depend on its pruning),
as the enumeration's (search_enumerate.py): a lookup and a walk answer alike.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import comb
from operator import add

import msgspec

from engine.node.search import RUNNERS_UP, Found, SearchResult

TABLE_DEVICES = 16  # 2^16 subset scores (~0.5 MB of ints); 2^17 would double build time and memory


class Level(msgspec.Struct, frozen=True):
    """All k-subsets (position masks) with one pair-score sum."""

    score: int
    masks: tuple[int, ...]


class SubsetTable:
    """Pair-score sums of every subset of one topology's devices (positions 0..n-1)."""

    def __init__(self, weights: Sequence[Sequence[int]]) -> None:
        n = len(weights)
        if n > TABLE_DEVICES:
            raise ValueError(f"a subset table holds at most {TABLE_DEVICES} devices, got {n}")
        self.n = n
        scores = [0]
        for j in range(n):
            # gain[m]: j's pair score to the members of m (m over devices 0..j-1), by the same doubling
            gain = [0]
            row = weights[j]
            for i in range(j):
                gain += list(map(row[i].__add__, gain))
            scores += list(map(add, scores, gain))
        self.scores: list[int] = scores
        self._levels: dict[int, tuple[Level, ...]] = {}

    def levels(self, k: int) -> tuple[Level, ...]:
        found = self._levels.get(k)
        if found is None:
            score_of = self.scores.__getitem__
            masks = sorted(map(sum, itertools.combinations([1 << p for p in range(self.n)], k)), key=score_of)
            masks.reverse()  # best first; the order inside a level does not matter (a query ranks a whole level)
            found = tuple(Level(score, tuple(group)) for score, group in itertools.groupby(masks, key=score_of))
            self._levels[k] = found
        return found


def table_best(
    table: SubsetTable,
    k: int,
    members: Sequence[int],
    idle_mask: int | None,
) -> SearchResult:
    """The best k of `members` (table positions, in the caller's order) by search.py's key.

    `idle_mask`: the node's idle devices (table positions) whose links the remainder keeps;
    None = the remainder plays no part (cut 0). Positions in the answer index `members`."""
    g = len(members)
    if not 0 <= k <= g:
        raise ValueError(f"cannot choose {k} of {g} devices")
    if k == 0:
        return SearchResult(best=Found((), 0, 0))
    rank_bit = [0] * table.n  # table position -> bit of its reversed rank in the caller's order
    free = 0
    for r, p in enumerate(members):
        rank_bit[p] = 1 << (g - 1 - r)
        free |= 1 << p
    blocked = ((1 << table.n) - 1) & ~free
    scores = table.scores
    whole = scores[idle_mask] if idle_mask is not None else 0
    ranked: list[tuple[int, int, int, int]] = []  # (-internal, cut, -reversed rank mask, mask)
    for level in table.levels(k):
        hits = [m for m in level.masks if not m & blocked]
        if not hits:
            continue
        for mask in hits:
            cut = 0
            if idle_mask is not None:
                cut = whole - scores[mask & idle_mask] - scores[idle_mask & ~mask]
            order = 0
            rest = mask
            while rest:
                low = rest & -rest
                order |= rank_bit[low.bit_length() - 1]
                rest ^= low
            ranked.append((-level.score, cut, -order, mask))
        if len(ranked) > RUNNERS_UP:
            break
    ranked.sort()
    found = [_found(rank_bit, g, entry) for entry in ranked[: RUNNERS_UP + 1]]
    # `expanded`: the sets the answer ranks over, as the enumeration reports it (search_enumerate.py): the two
    # answer alike, so which one a warm or cold engine took never shows.
    return SearchResult(best=found[0], runners_up=tuple(found[1:]), exact=True, expanded=comb(g, k))


def _found(rank_bit: list[int], g: int, entry: tuple[int, int, int, int]) -> Found:
    neg_internal, cut, neg_order, _ = entry
    order = -neg_order
    positions = tuple(r for r in range(g) if order >> (g - 1 - r) & 1)
    return Found(positions, -neg_internal, cut)


def uniform_best(score: int, k: int, idle: Sequence[bool], idle_count: int | None) -> SearchResult:
    """The best k of g candidates on a node where every pair scores `score`.

    `idle[r]`: whether the candidate of rank r is idle; `idle_count`: the node's idle devices
    (None = the remainder plays no part). A set taking t idle devices cuts score * t * (I - t)."""
    g = len(idle)
    if not 0 <= k <= g:
        raise ValueError(f"cannot choose {k} of {g} devices")
    internal = score * (k * (k - 1) // 2)
    idle_ranks = [r for r in range(g) if idle[r]]
    busy_ranks = [r for r in range(g) if not idle[r]]
    ranked: list[tuple[int, tuple[int, ...]]] = []
    for t in range(max(0, k - len(busy_ranks)), min(k, len(idle_ranks)) + 1):
        cut = score * t * (idle_count - t) if idle_count is not None else 0
        # A set's idle part earlier in its own order makes the whole set earlier (the first difference
        # of two sets with the same busy part lies in the idle part), so the first few of each part suffice.
        firsts = list(itertools.islice(itertools.combinations(idle_ranks, t), RUNNERS_UP + 1))
        seconds = list(itertools.islice(itertools.combinations(busy_ranks, k - t), RUNNERS_UP + 1))
        ranked += [(cut, tuple(sorted(a + b))) for a in firsts for b in seconds]
    ranked.sort()
    found = [Found(positions, internal, cut) for cut, positions in ranked[: RUNNERS_UP + 1]]
    return SearchResult(best=found[0], runners_up=tuple(found[1:]), exact=True, expanded=len(ranked))
