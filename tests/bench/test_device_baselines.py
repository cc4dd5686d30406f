"""Baseline device choices on hand-built link tables, derived from each baseline's published rule."""

from __future__ import annotations

import itertools

import pytest

from bench.device_baselines import first_fit, gpuallocator_best_effort, hami_v27
from bench.links import LinkClass, PairTable, link_class, optimum
from schemas.topology import Link, PcieLevel


def both(a: int, b: int, nvlinks: int = 0, pcie: PcieLevel | None = None) -> list[Link]:
    return [Link(src=a, dst=b, nvlinks=nvlinks, pcie=pcie), Link(src=b, dst=a, nvlinks=nvlinks, pcie=pcie)]


def table_4() -> PairTable:
    """0-1: 2 NVLinks (200); 2-3: 1 NVLink (100); every other pair across sockets (SYS, 10)."""
    links = both(0, 1, nvlinks=2) + both(2, 3, nvlinks=1)
    for a, b in ((0, 2), (0, 3), (1, 2), (1, 3)):
        links += both(a, b, pcie=PcieLevel.SYS)
    return PairTable([0, 1, 2, 3], links)


def test_pair_scores_follow_the_shared_table():
    t = table_4()
    assert t.score[0, 1] == 200 and t.score[2, 3] == 100 and t.score[0, 2] == 10
    assert t.set_score([0, 1, 2]) == 200 + 10 + 10


def test_hami_single_gpu_is_the_one_with_the_lowest_total_score():
    # Totals: GPU0 220, GPU1 220, GPU2 120, GPU3 120; the walk starts at the end, so GPU 3 is found first.
    assert hami_v27(table_4(), [0, 1, 2, 3], 1) == (3,)


def test_hami_multi_gpu_is_the_first_best_combination_of_the_reversed_walk():
    assert set(hami_v27(table_4(), [0, 1, 2, 3], 2)) == {0, 1}
    assert set(hami_v27(table_4(), [1, 2, 3], 2)) == {2, 3}


def test_gpuallocator_maximises_the_whole_partition_then_takes_its_best_set():
    # Partitions into pairs: {01,23} = 300, {02,13} = 20, {03,12} = 20 -> {01,23}; its best set is 01.
    assert gpuallocator_best_effort(table_4(), [0, 1, 2, 3], 2) == (0, 1)
    assert gpuallocator_best_effort(table_4(), [0, 1, 2, 3], 1) == (0,)
    assert gpuallocator_best_effort(table_4(), [0, 1], 3) == ()


def test_gpuallocator_can_give_up_the_best_single_set_to_keep_the_partition_good():
    # Six GPUs, pairs wanted. 0-1 is the best pair (300) but taking it strands 2..5 badly;
    # the partition {0,2},{1,3},{4,5} scores more in total, and best-effort returns its best set.
    scores = {(0, 1): 3, (0, 2): 2, (1, 3): 2, (4, 5): 2, (2, 3): 0, (2, 4): 0, (3, 5): 0}
    links = []
    for a, b in itertools.combinations(range(6), 2):
        links += both(a, b, nvlinks=scores.get((a, b), 0), pcie=PcieLevel.SYS)
    t = PairTable(range(6), links)
    # {01}(310) + best of the rest {2..5}: {45}(210)+{23}(10) = 530 ; {02}(210)+{13}(210)+{45}(210) = 630.
    chosen = gpuallocator_best_effort(t, list(range(6)), 2)
    assert t.set_score(chosen) == 210 and chosen in ((0, 2), (1, 3), (4, 5))
    assert set(hami_v27(t, list(range(6)), 2)) == {0, 1}  # greedy best single set


def test_first_fit_takes_the_lowest_free_indices():
    assert first_fit(table_4(), [3, 1, 2], 2) == (1, 2)


def test_optimum_is_the_exhaustive_best():
    t = table_4()
    for k in (2, 3, 4):
        brute = max(t.set_score(c) for c in itertools.combinations(range(4), k))
        assert optimum(t, range(4), k) == brute
    with pytest.raises(ValueError, match="k: 5"):
        optimum(t, range(4), 5)


def test_link_classes():
    t = table_4()
    assert link_class(t, [0, 1]) is LinkClass.NVLINK_ALL
    assert link_class(t, [0, 2]) is LinkClass.CROSS_SOCKET
    assert link_class(t, [3]) is LinkClass.SINGLE
    chain = PairTable([0, 1, 2], both(0, 1, nvlinks=1) + both(1, 2, nvlinks=1) + both(0, 2, pcie=PcieLevel.PIX))
    assert link_class(chain, [0, 1, 2]) is LinkClass.NVLINK_CONNECTED
    switch = PairTable([0, 1], both(0, 1, pcie=PcieLevel.PXB))
    assert link_class(switch, [0, 1]) is LinkClass.PCIE_SWITCH
