"""A gang's answer names each tier it went past and why, and its kube-style count covers every node.

On Volcano's documented tree (engine tests' volcano_example): node0..node7 under ToRs s0..s3 (tier 1),
spines s4 = {s0, s1} and s5 = {s2, s3} (tier 2), s6 over both (tier 3), and the whole cluster (tier 4).
"""

from __future__ import annotations

import re

import msgspec
import pytest
from engine_builders import fixture_node
from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import volcano_example
from test_gang import EIGHT_NODES, H100, cluster, decide, hard, member

from engine import NodeState, PodRequest
from engine.decide.gang.request import TierRefusal
from schemas.events import NetworkConstraint, SubGroupPolicy, TopologyMode

FULL = list(range(8))
SOFT_1 = NetworkConstraint(mode=TopologyMode.SOFT, highest_tier=1)
ROLES = [{"role": "a"}, {"role": "a"}, {"role": "a"}, {"role": "b"}]


class Case(msgspec.Struct, frozen=True, kw_only=True):
    busy: dict[str, list[int]] = {}
    pods: list[PodRequest]
    network: NetworkConstraint | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    tier: int | None  # where it is placed; None: not placed
    refused: list[tuple[int, str]]  # (tier, reason) of each tier it went past, lowest first


CASES = {
    "a hard limit too low": Case(
        busy={"node0": [0, 1]},
        pods=[member(i) for i in range(3)],
        network=hard(1),
        tier=None,
        refused=[(1, "at most 2 of 3 pending member(s) fit in one hypernode (s1)")],
    ),
    "soft: placed two tiers up": Case(
        pods=[member(i) for i in range(5)],
        network=SOFT_1,
        tier=3,
        refused=[
            (1, "at most 2 of 5 pending member(s) fit in one hypernode (s0)"),
            (2, "at most 4 of 5 pending member(s) fit in one hypernode (s4)"),
        ],
    ),
    "no constraint: the lowest tier that holds it": Case(
        busy={"node0": FULL},
        pods=[member(i) for i in range(3)],
        tier=2,
        refused=[(1, "at most 2 of 3 pending member(s) fit in one hypernode (s1)")],
    ),
    "running members span a spine": Case(
        busy={"node0": FULL, "node2": FULL},
        pods=[member(0, node_name="node0"), member(1, node_name="node2"), member(2)],
        network=hard(2),
        tier=2,
        refused=[(1, "the running members already span s4 (tier 2)")],
    ),
    "room only outside the running members' ToR": Case(
        busy={"node0": FULL, "node1": FULL},
        pods=[member(0, node_name="node0"), member(1, node_name="node1"), member(2)],
        network=hard(1),
        tier=None,
        refused=[
            (1, "3 hypernode(s) have room for all 1 pending member(s), none of them inside s0, where the running "
                "members are"),
        ],
    ),
    "room, but no layout keeps a subgroup in its ToR": Case(
        pods=[member(i, labels=ROLES[i]) for i in range(4)],
        network=hard(2),
        sub_groups=(SubGroupPolicy(name="roles", match_label_keys=("role",), network=hard(1)),),
        tier=None,
        refused=[
            (1, "at most 2 of 4 pending member(s) fit in one hypernode (s0)"),
            (2, "2 hypernode(s) have room for all 4 pending member(s), but in the 2 planned no layout keeps each "
                "subgroup inside its limit and every member's rules"),
        ],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_tier_gone_past_is_named_with_its_reason(case: Case) -> None:
    decision = decide(cluster(case.busy), volcano_example(), case.pods, case.network, case.sub_groups)
    assert decision.placed is (case.tier is not None)
    assert decision.tier == case.tier
    assert [(r.tier, r.reason) for r in decision.refused_tiers] == case.refused
    if not decision.placed:  # the reason says it too, tier by tier
        for tier, reason in case.refused:
            assert f"tier {tier}: {reason}" in decision.reason


def test_the_virtual_top_is_called_the_whole_cluster() -> None:
    decision = decide(cluster(), volcano_example(), [member(i) for i in range(9)])
    assert decision.refused_tiers[-1] == TierRefusal(
        tier=4, tier_name="the whole cluster", reason="at most 8 of 9 pending member(s) fit in the whole cluster"
    )
    assert "tier 4 (the whole cluster): at most 8 of 9" in decision.reason


def counts(reason: str) -> tuple[int, dict[str, int]]:
    """The total and the histogram of kube-scheduler's message at the end of a reason."""
    found = re.search(r"0/(\d+) nodes are available: (.*)\.$", reason)
    assert found is not None, reason
    histogram = {}
    for entry in found.group(2).split(", "):
        count, _, text = entry.partition(" ")
        histogram[text] = int(count)
    return int(found.group(1)), histogram


COUNTS = {
    "some nodes short of GPUs, the rest in no ToR that holds the gang": (
        {"node0": [0, 1]}, 3, hard(1),
        {"Insufficient nvidia.com/gpu": 1, "node(s) were in no hypernode of tier <= 1 that holds the whole gang": 7},
    ),
    "more members than the cluster holds": (
        {"node3": [5]}, 9, None,
        {"Insufficient nvidia.com/gpu": 1, "node(s) had room for only part of the gang": 7},
    ),
    "every node short": ({n: [0] for n in EIGHT_NODES}, 2, None, {"Insufficient nvidia.com/gpu": 8}),
}  # fmt: skip


@pytest.mark.parametrize(("busy", "members", "network", "histogram"), COUNTS.values(), ids=COUNTS.keys())
def test_the_kube_count_covers_every_node(
    busy: dict[str, list[int]], members: int, network: NetworkConstraint | None, histogram: dict[str, int]
) -> None:
    decision = decide(cluster(busy), volcano_example(), [member(i) for i in range(members)], network)
    assert not decision.placed
    assert counts(decision.reason) == (8, histogram)


def test_nodes_left_out_of_a_label_tree_are_counted_as_outside_it() -> None:
    def labelled(name: str, rack: str | None) -> NodeState:
        labels = {"cloud/rack": rack, "kubernetes.io/hostname": name} if rack else {"kubernetes.io/hostname": name}
        return msgspec.structs.replace(fixture_node(name, H100), labels=labels)

    nodes = [labelled("n1", "r1"), labelled("n2", "r2"), labelled("n3", None)]
    rack = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="cloud/rack")
    decision = decide(nodes, [], [member(0), member(1)], rack, levels=("cloud/rack", "kubernetes.io/hostname"))
    assert not decision.placed
    assert counts(decision.reason) == (
        3,
        {
            "node(s) were in no hypernode of tier <= 1 that holds the whole gang": 2,
            "node(s) were outside the network topology": 1,
        },
    )


@settings(max_examples=40, deadline=None)
@given(
    busy=st.dictionaries(st.sampled_from(EIGHT_NODES), st.lists(st.integers(0, 7), max_size=8, unique=True)),
    members=st.integers(1, 10),
    gpus=st.sampled_from([1, 2, 4, 8]),
    tier=st.sampled_from([None, 1, 2, 3]),
)
def test_an_unplaced_gang_accounts_for_every_node_and_every_tier_below_its_limit(
    busy: dict[str, list[int]], members: int, gpus: int, tier: int | None
) -> None:
    """Each node here has one reason (GPUs only), so the counts add up to the nodes; a placed gang
    names exactly the tiers below its own."""
    decision = decide(cluster(busy), volcano_example(), [member(i, gpus) for i in range(members)], tier and hard(tier))
    if decision.placed:
        assert decision.tier is not None
        assert [r.tier for r in decision.refused_tiers] == list(range(1, decision.tier))
        return
    total, histogram = counts(decision.reason)
    assert total == 8 and sum(histogram.values()) == 8
    assert [r.tier for r in decision.refused_tiers] == list(range(1, (tier or 4) + 1))
