"""Device choice inside one node by the baselines, reimplemented from their public descriptions.

- HAMi v2.7, NVIDIA topology-aware (Project-HAMi/HAMi pkg/device/nvidia): the
  free GPUs are walked from the end of the device list (index order assumed:
  all free GPUs score equally under HAMi's device policy, see README); for one
  GPU, the one whose summed pair score to the other candidates is lowest (the
  first found wins ties); for k > 1, every k-combination of that walk order,
  the first with the highest pair-score sum wins.
- NVIDIA go-gpuallocator best-effort (gpuallocator/besteffort_policy.go): pad the
  free GPUs to a multiple of k, enumerate every partition of them into sets of
  k (sets with padding only if all padding is in one set), keep the partition
  with the highest summed set score (first found wins ties), and return its
  best unpadded set.
- First-fit: the lowest-index free devices (the default scheduler plus a device
  plugin that hands out the first free devices).
All take device *positions* on a `PairTable` and return positions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations

from bench.links import PairTable, best_set


def first_fit(table: PairTable, free: Sequence[int], k: int) -> tuple[int, ...]:
    return tuple(sorted(free)[:k])


def hami_v27(table: PairTable, free: Sequence[int], k: int) -> tuple[int, ...]:
    walk = sorted(free, reverse=True)
    if k == 1:
        best: tuple[int, ...] = ()
        best_total = -1
        for a in walk:
            total = sum(int(table.score[a, b]) for b in walk if b != a)
            if best_total < 0 or total < best_total:
                best, best_total = (a,), total
        return best
    return best_set(table, walk, k)


def _partitions(devices: list[int | None], k: int, padding: int) -> Iterator[list[tuple[int | None, ...]]]:
    """Every partition of `devices` into sets of k, first element of each set in increasing order."""
    if len(devices) == k:
        yield [tuple(devices)]
        return
    head, rest = devices[0], devices[1:]
    for tail in combinations(rest, k - 1):
        chosen = (head, *tail)
        pads = sum(1 for d in chosen if d is None)
        if pads not in (0, padding):
            continue
        remaining = list(rest)
        for t in tail:
            remaining.remove(t)
        for more in _partitions(remaining, k, padding):
            yield [chosen, *more]


def _set_score(table: PairTable, s: Sequence[int | None]) -> int:
    real = [d for d in s if d is not None]
    return table.set_score(real) if len(real) >= 2 else 0


def gpuallocator_best_effort(table: PairTable, free: Sequence[int], k: int) -> tuple[int, ...]:
    available = sorted(free)
    if k <= 0 or len(available) < k:
        return ()
    if k == 1:
        # Every single device is its own partition, all score 0: the first wins.
        return (available[0],)
    devices: list[int | None] = list(available)
    while len(devices) % k:
        devices.append(None)
    padding = len(devices) - len(available)
    best_partition: list[tuple[int | None, ...]] | None = None
    best_score = 0
    for partition in _partitions(devices, k, padding):
        if not any(None not in s for s in partition):
            continue
        score = sum(_set_score(table, s) for s in partition)
        if best_partition is None or score > best_score:
            best_partition, best_score = partition, score
    assert best_partition is not None
    unpadded = [s for s in best_partition if None not in s]
    best = max(unpadded, key=lambda s: _set_score(table, s))  # max() keeps the first of equal sets
    return tuple(d for d in best if d is not None)
