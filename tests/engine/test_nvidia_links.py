"""NVIDIA pair scores: HAMi's table, NVSwitch, the 18-link ceiling, asymmetric links."""

from __future__ import annotations

import pytest
from engine_builders import both, gpu, node, pod, snapshot

from engine import place
from engine.node.vendors.nvidia.links import pair_score
from schemas.topology import Link, PcieLevel

EXPECTED_PCIE = [
    (PcieLevel.SYS, 10),
    (PcieLevel.NODE, 20),
    (PcieLevel.PHB, 30),
    (PcieLevel.PXB, 40),
    (PcieLevel.PIX, 50),
    (PcieLevel.SAME_BOARD, 60),
]


def _links(*links: Link) -> dict[tuple[int, int], Link]:
    return {(link.src, link.dst): link for link in links}


@pytest.mark.parametrize(("level", "score"), EXPECTED_PCIE)
def test_each_pcie_level_scores_as_hami(level: PcieLevel, score: int) -> None:
    assert pair_score(gpu(0), gpu(1), _links(*both(0, 1, pcie=level))).score == score


@pytest.mark.parametrize("k", [1, 2, 4, 12, 18])
def test_nvlinks_score_100_each_plus_the_pcie_path(k: int) -> None:
    unknown = gpu(0, numa=None), gpu(1, numa=None)
    assert pair_score(*unknown, _links(*both(0, 1, nvlinks=k))).score == 100 * k
    assert pair_score(gpu(0), gpu(1), _links(*both(0, 1, nvlinks=k, pcie=PcieLevel.SYS))).score == 100 * k + 10


@pytest.mark.parametrize(
    ("numa_a", "numa_b", "level"),
    [(0, 0, PcieLevel.NODE), (0, 1, PcieLevel.SYS), (None, 0, None), (1, None, None)],
)
def test_an_nvlink_pair_with_no_pcie_path_takes_it_from_the_numa_nodes(
    numa_a: int | None, numa_b: int | None, level: PcieLevel | None
) -> None:
    # A topo -m print says only NV# for such a pair; NVML's common ancestor says NODE or SYS.
    pair = pair_score(gpu(0, numa=numa_a), gpu(1, numa=numa_b), _links(*both(0, 1, nvlinks=18)))
    assert pair.pcie is level
    assert pair.score == 1800 + (dict(EXPECTED_PCIE)[level] if level is not None else 0)


def test_a_printed_pcie_path_is_kept_whatever_the_numa_nodes_say() -> None:
    pair = pair_score(gpu(0, numa=0), gpu(1, numa=1), _links(*both(0, 1, nvlinks=2, pcie=PcieLevel.PIX)))
    assert (pair.pcie, pair.score) == (PcieLevel.PIX, 250)


def test_nvswitch_pair_gets_the_smaller_switch_link_count() -> None:
    pair = pair_score(gpu(0, nvswitch=18, numa=None), gpu(1, nvswitch=12, numa=None), {})
    assert (pair.score, pair.nvlinks) == (1200, 12)


def test_nvswitch_needs_both_gpus_on_the_fabric() -> None:
    assert pair_score(gpu(0, nvswitch=18), gpu(1), {}).score == 0


def test_direct_nvlink_wins_over_the_switch() -> None:
    pair = pair_score(gpu(0, nvswitch=18, numa=1), gpu(1, nvswitch=18, numa=1), _links(*both(0, 1, nvlinks=2)))
    assert pair.score == 200 + 20  # NVLinks, plus NODE: one NUMA node


def test_more_than_18_links_count_as_18_with_a_note() -> None:
    pair = pair_score(gpu(0, numa=None), gpu(1, numa=None), _links(*both(0, 1, nvlinks=24)))
    assert pair.score == 1800
    assert "24 NVLinks" in pair.note


def test_asymmetric_pair_scores_zero_and_says_so() -> None:
    links = _links(Link(src=0, dst=1, nvlinks=2), Link(src=1, dst=0, nvlinks=1))
    pair = pair_score(gpu(0), gpu(1), links)
    assert pair.score == 0
    assert pair.asymmetric
    assert pair.note == "asymmetric link 0<->1"


def test_a_link_reported_one_way_is_taken_as_symmetric() -> None:
    assert pair_score(gpu(0), gpu(1), _links(Link(src=1, dst=0, pcie=PcieLevel.PIX))).score == 50


def test_no_link_data_scores_zero() -> None:
    assert pair_score(gpu(0), gpu(1), {}).score == 0


def test_asymmetric_link_is_a_warning_in_the_decision_not_a_crash() -> None:
    # 0<->1 asymmetric (would be NV2), 2<->3 PIX, everything else SYS: the PIX pair wins.
    links = [Link(src=0, dst=1, nvlinks=2), Link(src=1, dst=0, nvlinks=1), *both(2, 3, pcie=PcieLevel.PIX)]
    for a, b in [(0, 2), (0, 3), (1, 2), (1, 3)]:
        links.extend(both(a, b, pcie=PcieLevel.SYS))
    decision = place(snapshot(node("n1", [gpu(i) for i in range(4)], links)), pod(2, policy="topology-aware"))
    assert [d.index for d in decision.devices] == [2, 3]
    assert decision.score_parts["set_score"] == 50
    assert "n1: asymmetric link 0<->1" in decision.warnings
