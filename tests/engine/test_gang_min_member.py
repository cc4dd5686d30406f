"""Minimum-member placement (Volcano's minMember, Kueue's pod-group total, Volcano's minSubGroups): when
the whole gang does not fit, at least its minimum is placed inside one domain within the gang's limit,
never fewer; later members join inside the allowed ancestor of the running ones."""

from __future__ import annotations

import random

import msgspec
from engine_builders import fixture_node
from gang_cases import H100, cluster, decide_gang, hard, pod
from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import hn, node, sub, volcano_example

from engine import NodeState, PodRequest
from schemas.events import NetworkConstraint, SubGroupPolicy, TopologyMode

FULL = list(range(8))


def test_min_member_of_four_places_two_when_only_two_fit_within_the_hard_tier() -> None:
    busy = {n: FULL for n in ("node2", "node3", "node4", "node5", "node6", "node7")}
    pods = [pod(f"w-{i}") for i in range(4)]
    decision = decide_gang(cluster(busy), volcano_example(), pods, hard(1), min_member=2, minimum_placement=True)
    assert decision.placed and decision.partial
    assert [p.node for p in decision.pods] == ["node0", "node1", None, None]  # the lowest ranks first
    assert decision.hypernode == "s0"
    assert "minimum" in decision.reason


def test_never_below_the_minimum() -> None:
    busy = {n: FULL for n in ("node2", "node3", "node4", "node5", "node6", "node7")}
    pods = [pod(f"w-{i}") for i in range(4)]
    decision = decide_gang(cluster(busy), volcano_example(), pods, hard(1), min_member=3, minimum_placement=True)
    assert not decision.placed
    assert all(p.node is None for p in decision.pods)


def test_without_minimum_placement_the_gang_stays_all_or_nothing() -> None:
    busy = {n: FULL for n in ("node2", "node3", "node4", "node5", "node6", "node7")}
    pods = [pod(f"w-{i}") for i in range(4)]
    assert not decide_gang(cluster(busy), volcano_example(), pods, hard(1), min_member=2).placed


def test_the_whole_gang_is_still_preferred_over_its_minimum() -> None:
    pods = [pod(f"w-{i}") for i in range(4)]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(2), min_member=2, minimum_placement=True)
    assert decision.placed and not decision.partial
    assert all(p.node is not None for p in decision.pods)


def test_later_members_join_inside_the_allowed_ancestor_of_the_running_ones() -> None:
    # Two members run under s0 (spine s4 is their tier-2 ancestor); of three pending, one slot is left
    # under s4 (node3) while s5 is empty: one joins s4 and two wait, rather than any going to s5.
    busy = {"node0": FULL, "node1": FULL, "node2": FULL}
    pods = [pod("w-0", node_name="node0"), pod("w-1", node_name="node1")] + [pod(f"w-{i}") for i in range(2, 5)]
    decision = decide_gang(cluster(busy), volcano_example(), pods, hard(2), min_member=2, minimum_placement=True)
    assert decision.placed and decision.partial
    new = {p.name: p.node for p in decision.pods if not p.running}
    assert new == {"w-2": "node3", "w-3": None, "w-4": None}
    assert decision.hypernode == "s4"


def test_min_sub_groups_places_the_required_replicas_whole_or_nothing() -> None:
    # Two replicas of two 8-GPU members, each within one ToR; only s0 is free. minSubGroups 1: replica 0
    # (the first by its value) is placed whole in s0 and replica 1 waits; minSubGroups 2: nothing.
    busy = {n: FULL for n in ("node2", "node3", "node4", "node5", "node6", "node7")}
    pods = [pod(f"w-{i}", labels={"replica": str(i // 2)}) for i in range(4)]

    def policy(min_sub_groups: int) -> SubGroupPolicy:
        return SubGroupPolicy(
            name="r", match_label_keys=("replica",), sub_group_size=2, min_sub_groups=min_sub_groups, network=hard(1)
        )

    one = decide_gang(
        cluster(busy), volcano_example(), pods, hard(3), (policy(1),), min_member=2, minimum_placement=True
    )
    assert {p.name: p.node for p in one.pods} == {"w-0": "node0", "w-1": "node1", "w-2": None, "w-3": None}
    two = decide_gang(
        cluster(busy), volcano_example(), pods, hard(3), (policy(2),), min_member=2, minimum_placement=True
    )
    assert not two.placed


def test_a_subgroup_below_its_size_keeps_no_member() -> None:
    # subGroupSize 2 with one slot free in a ToR: the subgroup is not placed at one member (Volcano
    # discards a subJob below its size), so the gang is held back rather than split.
    busy = {n: FULL for n in ("node1", "node2", "node3", "node4", "node5", "node6", "node7")}
    pods = [pod(f"w-{i}", labels={"replica": "0"}) for i in range(2)] + [pod("launcher", 1)]
    policy = SubGroupPolicy(name="r", match_label_keys=("replica",), sub_group_size=2, network=hard(1))
    decision = decide_gang(
        cluster(busy), volcano_example(), pods, hard(3), (policy,), min_member=1, minimum_placement=True
    )
    assert {p.name: p.node for p in decision.pods} == {"w-0": None, "w-1": None, "launcher": "node0"}


# --- properties --------------------------------------------------------------------------------


@st.composite
def gangs(draw: st.DrawFn) -> tuple[list[NodeState], list[object], list[PodRequest], NetworkConstraint, int]:
    tors = draw(st.integers(1, 4))
    per_tor = draw(st.integers(1, 3))
    names = [f"n{t}-{i}" for t in range(tors) for i in range(per_tor)]
    rng = random.Random(draw(st.integers(0, 10_000)))
    nodes = [fixture_node(n, H100, busy=sorted(rng.sample(range(8), rng.choice((0, 2, 4, 8, 8))))) for n in names]
    hypernodes: list[object] = [hn(f"tor{t}", 1, *(node(f"n{t}-{i}") for i in range(per_tor))) for t in range(tors)]
    hypernodes.append(hn("spine", 2, *(sub(f"tor{t}") for t in range(tors))))
    pods = [pod(f"w-{i}", draw(st.sampled_from((2, 4, 8)))) for i in range(draw(st.integers(1, 6)))]
    constraint = NetworkConstraint(mode=draw(st.sampled_from(list(TopologyMode))), highest_tier=draw(st.integers(1, 3)))
    return nodes, hypernodes, pods, constraint, draw(st.integers(1, len(pods)))


@settings(max_examples=80, deadline=None)
@given(gangs())
def test_never_below_the_minimum_within_the_hard_tier_and_the_same_answer_again(
    case: tuple[list[NodeState], list[object], list[PodRequest], NetworkConstraint, int],
) -> None:
    nodes, hypernodes, pods, constraint, minimum = case
    decision = decide_gang(nodes, hypernodes, pods, constraint, min_member=minimum, minimum_placement=True)
    placed = [p.node for p in decision.pods if p.node is not None]
    assert len(placed) == 0 or len(placed) >= minimum
    assert decision.placed == bool(placed)
    assert decision.partial == (0 < len(placed) < len(pods))
    if placed and constraint.mode is TopologyMode.HARD:
        assert decision.tier is not None and decision.tier <= (constraint.highest_tier or 0)
    whole = decide_gang(nodes, hypernodes, pods, constraint, min_member=len(pods))
    if whole.placed:  # the minimum is only for when the whole gang does not fit
        assert len(placed) == len(pods)
    again = decide_gang(list(reversed(nodes)), list(reversed(hypernodes)), list(reversed(pods)), constraint,
                        min_member=minimum, minimum_placement=True)  # fmt: skip
    assert again == decision


@settings(max_examples=60, deadline=None)
@given(gangs(), st.integers(0, 3), st.integers(1, 3))
def test_never_below_min_sub_groups_nor_a_subgroups_size(
    case: tuple[list[NodeState], list[object], list[PodRequest], NetworkConstraint, int], wanted: int, size: int
) -> None:
    nodes, hypernodes, pods, constraint, minimum = case
    pods = [msgspec.structs.replace(p, labels={"replica": str(i % 3)}) for i, p in enumerate(pods)]
    policy = SubGroupPolicy(
        name="r", match_label_keys=("replica",), sub_group_size=size, min_sub_groups=wanted, network=hard(1)
    )
    decision = decide_gang(nodes, hypernodes, pods, constraint, (policy,), min_member=minimum, minimum_placement=True)
    placed = [p for p in decision.pods if p.node is not None]
    if not placed or not decision.partial:
        return
    by_group: dict[str, list[str]] = {}
    for p in placed:
        by_group.setdefault(p.sub_group, []).append(p.node or "")
    assert len(placed) >= minimum
    assert all(len(members) >= size for members in by_group.values())  # no subgroup below its size
    assert len(by_group) >= wanted
    assert all(len({n.split("-")[0] for n in members}) == 1 for members in by_group.values())  # tier 1
