"""Several topology trees at once: two fabrics of HyperNodes (an H100 spine-leaf and GB200 NVL72 racks)
and trees of mixed depth. A hard tierName is resolved in the trees that carry it: a gang's domain (and
each subgroup's) lies inside a hypernode of that name, never in another fabric's tier of the same
number; a name that several tiers carry (mixed depths) is allowed up to the highest of them."""

from __future__ import annotations

from gang_cases import cluster, decide_gang, pod
from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import hn, node, sub

from schemas.events import NetworkConstraint, SubGroupPolicy, TopologyMode

NAMES = [f"node{i}" for i in range(8)]


def named(name: str) -> NetworkConstraint:
    return NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=name)


def two_fabrics() -> list[object]:
    # H100: leaves a0 {node0, node1}, a1 {node2, node3} ("leaf", tier 1) under spine a ("spine", tier 2).
    # GB200: NVL72 racks b0 {node4, node5}, b1 {node6, node7} ("nvl72", tier 1) under row b ("row", tier 2).
    return [
        hn("a0", 1, node("node0"), node("node1"), tier_name="leaf"),
        hn("a1", 1, node("node2"), node("node3"), tier_name="leaf"),
        hn("a", 2, sub("a0"), sub("a1"), tier_name="spine"),
        hn("b0", 1, node("node4"), node("node5"), tier_name="nvl72"),
        hn("b1", 1, node("node6"), node("node7"), tier_name="nvl72"),
        hn("b", 2, sub("b0"), sub("b1"), tier_name="row"),
    ]


def test_a_tier_name_is_resolved_in_its_own_fabric() -> None:
    # "nvl72" is tier 1, as "leaf" is: the gang goes to an NVL72 rack, never to an H100 leaf (which the
    # tier walk, by number alone, would take first: a0 sorts before b0).
    decision = decide_gang(cluster(names=NAMES), two_fabrics(), [pod("w-0"), pod("w-1")], named("nvl72"))
    assert decision.placed and decision.hypernode in ("b0", "b1")
    assert {p.node for p in decision.pods} <= {"node4", "node5", "node6", "node7"}


def test_a_subgroups_tier_name_is_resolved_in_its_own_fabric() -> None:
    policy = SubGroupPolicy(name="tp", match_label_keys=("tp",), sub_group_size=2, network=named("nvl72"))
    pods = [pod(f"w-{i}", labels={"tp": "a"}) for i in range(2)]
    decision = decide_gang(cluster(names=NAMES), two_fabrics(), pods, None, (policy,))
    assert decision.placed and {p.domain for p in decision.pods} <= {"b0", "b1"}


def test_a_name_carried_by_several_tiers_is_allowed_up_to_the_highest() -> None:
    # Mixed depth: "rack" is tier 1 in one tree and tier 2 (over two tier-1 halves) in the other.
    tree = [
        hn("r0", 1, node("node0"), node("node1"), tier_name="rack"),
        hn("h0", 1, node("node2"), node("node3"), tier_name="half"),
        hn("h1", 1, node("node4"), node("node5"), tier_name="half"),
        hn("r1", 2, sub("h0"), sub("h1"), tier_name="rack"),
        hn("top", 3, sub("r0"), sub("r1")),
    ]
    pods = [pod(f"w-{i}") for i in range(4)]  # 4 nodes' worth: only r1 (tier 2) holds them
    decision = decide_gang(cluster(names=NAMES[:6]), tree, pods, named("rack"))
    assert decision.placed and decision.hypernode == "r1"
    assert not decide_gang(cluster(names=NAMES[:6]), tree, [*pods, pod("w-4")], named("rack")).placed


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([[], [0, 1, 2, 3], list(range(8))]), min_size=8, max_size=8), st.integers(1, 4))
def test_a_named_tier_is_never_left_for_another_fabric(busy: list[list[int]], size: int) -> None:
    decision = decide_gang(
        cluster({n: b for n, b in zip(NAMES, busy, strict=True)}, NAMES),
        two_fabrics(),
        [pod(f"w-{i}", 4) for i in range(size)],
        named("nvl72"),
    )
    nodes = {p.node for p in decision.pods if p.node}
    if decision.placed:
        assert nodes <= {"node4", "node5"} or nodes <= {"node6", "node7"}
    else:
        assert not nodes
