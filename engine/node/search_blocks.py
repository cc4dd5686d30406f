"""A tighter search bound for nodes made of blocks (boards, sockets, NVLink islands).

Let b be the smallest pair score of the node. Link the pairs that score more
than b; the connected groups are the blocks, and every pair across blocks
scores exactly b. Then for any set S of k devices

    internal(S) = b * C(k, 2) + sum over blocks B of h(S & B),

with h the pair-score sum above b inside a block. A branch that has chosen C
and still needs r devices can reach at most

    b * C(k, 2) + sum_B h(C & B)
      + max over r_B (sum r_B = r) of sum_B [ top r_B gains above b into B + best h of r_B devices of B ],

a small knapsack over the blocks. Unlike the per-device bound it knows that
new devices cannot both hang on the chosen block and form a dense group in
another block, which is what makes eight near-identical boards tractable.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

EXACT_BLOCK_SETS = 2_000  # a block's best m-subset is enumerated up to this many sets
NEG = float("-inf")


def _blocks(weights: Sequence[Sequence[int]], floor: int) -> list[list[int]]:
    n = len(weights)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a in range(n):
        for c in range(a + 1, n):
            if weights[a][c] > floor:
                parent[find(a)] = find(c)
    groups: dict[int, list[int]] = {}
    for j in range(n):  # positions ascending, so each block's list and the block order are deterministic
        groups.setdefault(find(j), []).append(j)
    return list(groups.values())


def _best_inside(weights: Sequence[Sequence[int]], block: list[int], floor: int, m: int) -> float:
    """Upper bound on the above-floor pair-score sum of m devices of the block (exact when small)."""
    if m < 2:
        return 0.0
    reduced = [[weights[a][c] - floor for c in block] for a in block]
    size = len(block)
    count = 1
    for i in range(m):  # C(size, m) without building the combinations
        count = count * (size - i) // (i + 1)
    if count <= EXACT_BLOCK_SETS:
        return float(
            max(
                sum(reduced[x][y] for x, y in itertools.combinations(combo, 2))
                for combo in itertools.combinations(range(size), m)
            )  # fmt: skip
        )
    halves = sorted((sum(sorted(row, reverse=True)[: m - 1]) / 2 for row in reduced), reverse=True)
    return sum(halves[:m])


class BlockBound:
    """Built once per search; `bound(...)` per branch. `active` is False when the node is one block
    (or all singletons), where the knapsack cannot say more than the plain bound."""

    def __init__(self, weights: Sequence[Sequence[int]], k: int) -> None:
        n = len(weights)
        self.k = k
        self.floor = min((weights[a][c] for a in range(n) for c in range(a + 1, n)), default=0)
        self.blocks = _blocks(weights, self.floor)
        self.active = n >= 4 and k >= 2 and 2 <= len(self.blocks) <= n // 2
        self.inside: list[list[float]] = []
        if self.active:
            for block in self.blocks:
                self.inside.append([_best_inside(weights, block, self.floor, m) for m in range(min(k, len(block)) + 1)])

    def bound(self, chosen: int, internal: int, gain: Sequence[int], start: int, r: int) -> float:
        floor = self.floor
        base = floor * (self.k * (self.k - 1) // 2) + internal - floor * (chosen * (chosen - 1) // 2)
        best = [0.0] + [NEG] * r
        for block, inside in zip(self.blocks, self.inside, strict=True):
            allowed = sorted((gain[j] - floor * chosen for j in block if j >= start), reverse=True)
            limit = min(r, len(allowed), len(inside) - 1)
            if limit == 0:
                continue
            value = [0.0] * (limit + 1)
            acc = 0.0
            for x in range(1, limit + 1):
                acc += allowed[x - 1]
                value[x] = acc + inside[x]
            merged = best[:]
            for t in range(1, r + 1):
                for x in range(1, min(limit, t) + 1):
                    if best[t - x] != NEG and best[t - x] + value[x] > merged[t]:
                        merged[t] = best[t - x] + value[x]
            best = merged
        return base + best[r]
