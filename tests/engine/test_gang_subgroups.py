"""Every subGroupPolicy of a PodGroup, as Volcano forms subgroups: the first policy whose labelSelector
selects a member and whose matchLabelKeys it carries takes it; each subgroup stays within its own hard
tier, and the gang within its own — on Volcano's documented tree and on generated ones."""

from __future__ import annotations

import random

import msgspec
import pytest
from engine_builders import fixture_node
from gang_cases import H100, TOR, cluster, decide_gang, hard, pod
from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import hn, node, sub, volcano_example

from engine import NodeState, PodRequest
from engine.core.model import GangInput
from engine.decide.gang.input import gang_request
from schemas.errors import FieldError
from schemas.events import LabelSelector, LabelSelectorRequirement, NetworkConstraint, SubGroupPolicy, TopologyMode
from schemas.gangs import PodGroup


def leaves_by(decision_pods: object, key: str, pods: list[PodRequest]) -> dict[str, set[str]]:
    label = {p.uid: p.labels.get(key, "") for p in pods}
    out: dict[str, set[str]] = {}
    for placed in decision_pods:  # type: ignore[attr-defined]
        if placed.node is not None:
            out.setdefault(label[placed.uid], set()).add(TOR[placed.node])
    return out


def test_a_later_policy_keeps_its_subgroups_within_its_hard_tier() -> None:
    # The first policy takes only parameter servers; the workers' policy is the second one. Its two
    # replicas must each stay under one ToR (tier 1) while the gang may use a tier-2 spine.
    ps = SubGroupPolicy(name="ps", match_label_keys=("ps-group",), network=hard(1))
    workers = SubGroupPolicy(name="workers", match_label_keys=("replica",), network=hard(1))
    pods = [pod(f"w-{i}", labels={"replica": "ab"[i % 2]}) for i in range(4)]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(2), (ps, workers))
    assert decision.placed
    assert all(len(tors) == 1 for tors in leaves_by(decision.pods, "replica", pods).values())
    assert {p.sub_group for p in decision.pods} == {"workers/a", "workers/b"}


def test_a_label_selector_chooses_the_members_of_its_policy() -> None:
    # The launcher carries the replica label too, but only role=worker pods are the policy's: the launcher
    # is the gang's own member and may sit anywhere under the gang's limit.
    selector = LabelSelector(match_labels={"role": "worker"})
    policy = SubGroupPolicy(name="w", label_selector=selector, match_label_keys=("replica",), network=hard(1))
    workers = [pod(f"w-{i}", labels={"role": "worker", "replica": "r0"}) for i in range(2)]
    launcher = pod("launcher", labels={"role": "launcher", "replica": "r0"})
    decision = decide_gang(cluster(), volcano_example(), [launcher, *workers], hard(2), (policy,))
    assert decision.placed
    by_name = {p.name: p for p in decision.pods}
    assert by_name["launcher"].sub_group == ""
    assert {by_name["w-0"].sub_group, by_name["w-1"].sub_group} == {"w/r0"}
    assert len({TOR[by_name[w].node or ""] for w in ("w-0", "w-1")}) == 1


def test_a_selector_expression_and_a_member_missing_a_key_fall_to_the_next_policy() -> None:
    # Volcano: a member missing one of a policy's keys (or with it empty) is not that policy's.
    first = SubGroupPolicy(
        name="first",
        label_selector=LabelSelector(
            match_expressions=(LabelSelectorRequirement(key="tier", operator="In", values=("gpu",)),)
        ),
        match_label_keys=("replica", "shard"),
        network=hard(1),
    )
    second = SubGroupPolicy(name="second", match_label_keys=("replica",), network=hard(1))
    pods = [
        pod("a-0", labels={"tier": "gpu", "replica": "0", "shard": "x"}),
        pod("a-1", labels={"tier": "gpu", "replica": "0", "shard": "x"}),
        pod("b-0", labels={"tier": "gpu", "replica": "0"}),  # no shard: the second policy's
        pod("b-1", labels={"tier": "cpu", "replica": "0", "shard": "x"}),  # not selected: the second's
    ]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(2), (first, second))
    groups = {p.name: p.sub_group for p in decision.pods}
    assert groups == {"a-0": "first/0-x", "a-1": "first/0-x", "b-0": "second/0", "b-1": "second/0"}


def test_a_subgroup_larger_than_its_tier_leaves_the_gang_unplaced() -> None:
    # Three 8-GPU members of one replica cannot share a two-node ToR: never spread above tier 1.
    policy = SubGroupPolicy(name="r", match_label_keys=("replica",), network=hard(1))
    pods = [pod(f"w-{i}", labels={"replica": "0"}) for i in range(3)]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(3), (policy,))
    assert not decision.placed
    assert all(p.node is None for p in decision.pods)


def test_a_soft_subgroup_prefers_one_tor_and_spreads_when_it_must() -> None:
    soft = NetworkConstraint(mode=TopologyMode.SOFT, highest_tier=1)
    policy = SubGroupPolicy(name="r", match_label_keys=("replica",), network=soft)
    two = decide_gang(
        cluster(), volcano_example(), [pod(f"w-{i}", labels={"replica": "0"}) for i in range(2)], None, (policy,)
    )
    assert len({TOR[p.node or ""] for p in two.pods}) == 1
    three = [pod(f"w-{i}", labels={"replica": "0"}) for i in range(3)]
    assert decide_gang(cluster(), volcano_example(), three, None, (policy,)).placed


def test_running_members_of_a_subgroup_pin_its_pending_ones_to_their_tor() -> None:
    # replica 0 runs one member on node0 (ToR s0): its pending member must join s0 (node1), though the
    # gang's tier 2 would allow s1, whose last half node is the tighter fit.
    policy = SubGroupPolicy(name="r", match_label_keys=("replica",), network=hard(1))
    busy = {"node0": list(range(8)), "node2": list(range(8)), "node3": [0, 1, 2, 3]}
    pods = [
        pod("w-0", labels={"replica": "0"}, node_name="node0"),
        pod("w-1", 4, labels={"replica": "0"}),
    ]
    decision = decide_gang(cluster(busy), volcano_example(), pods, hard(2), (policy,))
    placed = [p for p in decision.pods if not p.running]
    assert [p.node for p in placed] == ["node1"]


def test_a_podgroup_reads_every_policy_with_its_label_selector() -> None:
    body = {
        "metadata": {"name": "job", "namespace": "ml"},
        "spec": {
            "minMember": 4,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
            "subGroupPolicy": [
                {"name": "ps", "labelSelector": {"matchLabels": {"role": "ps"}}, "matchLabelKeys": ["ps"]},
                {
                    "name": "workers",
                    "labelSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["w"]}]},
                    "matchLabelKeys": ["replica"],
                    "subGroupSize": 2,
                    "minSubGroups": 1,
                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                },
            ],
        },
    }
    group = msgspec.convert(body, PodGroup)
    gang = gang_request(GangInput(podgroup=group, pods=(pod("x"),)))
    assert [p.name for p in gang.sub_groups] == ["ps", "workers"]
    workers = gang.sub_groups[1]
    assert workers.label_selector == LabelSelector(
        match_expressions=(LabelSelectorRequirement(key="role", operator="In", values=("w",)),)
    )
    assert (workers.sub_group_size, workers.min_sub_groups) == (2, 1)
    assert workers.network == hard(1)
    assert gang.sub_groups[0].label_selector == LabelSelector(match_labels={"role": "ps"})


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "labelSelector"),
        ({"minSubGroups": -1}, "minSubGroups"),
        ({"subGroupSize": 0}, "subGroupSize"),
    ],
)
def test_a_bad_policy_is_named_by_its_field(policy: dict[str, object], field: str) -> None:
    group = msgspec.convert({"spec": {"subGroupPolicy": [{"name": "ok"}, policy]}}, PodGroup)
    with pytest.raises(FieldError) as caught:
        gang_request(GangInput(podgroup=group, pods=(pod("x"),)))
    assert caught.value.field.startswith(f"spec.subGroupPolicy[1].{field}")


# --- property: a hard tier, the gang's or a subgroup's, is never exceeded ----------------------


@st.composite
def subgrouped(
    draw: st.DrawFn,
) -> tuple[list[NodeState], list[object], list[PodRequest], NetworkConstraint, tuple[SubGroupPolicy, ...]]:
    tors = draw(st.integers(1, 4))
    per_tor = draw(st.integers(1, 3))
    names = [f"n{t}-{i}" for t in range(tors) for i in range(per_tor)]
    rng = random.Random(draw(st.integers(0, 10_000)))
    nodes = [fixture_node(n, H100, busy=sorted(rng.sample(range(8), rng.choice((0, 0, 2, 4, 8))))) for n in names]
    hypernodes: list[object] = [hn(f"tor{t}", 1, *(node(f"n{t}-{i}") for i in range(per_tor))) for t in range(tors)]
    hypernodes.append(hn("spine", 2, *(sub(f"tor{t}") for t in range(tors))))
    count = draw(st.integers(1, 6))
    pods = [
        pod(
            f"w-{i}",
            draw(st.sampled_from((1, 2, 4, 8))),
            labels={"role": draw(st.sampled_from(("a", "b"))), "replica": str(draw(st.integers(0, 2)))},
        )
        for i in range(count)
    ]
    policies = tuple(
        SubGroupPolicy(
            name=f"p{n}",
            label_selector=LabelSelector(match_labels={"role": role}),
            match_label_keys=("replica",),
            network=NetworkConstraint(
                mode=draw(st.sampled_from(list(TopologyMode))), highest_tier=draw(st.integers(1, 2))
            ),
        )
        for n, role in enumerate(("a", "b"))
    )
    gang = NetworkConstraint(mode=TopologyMode.HARD, highest_tier=draw(st.integers(1, 3)))
    return nodes, hypernodes, pods, gang, policies


def tier_of_nodes(nodes: set[str]) -> int:
    tors = {n.split("-")[0] for n in nodes}
    return 0 if len(nodes) <= 1 else 1 if len(tors) == 1 else 2


@settings(max_examples=60, deadline=None)
@given(subgrouped())
def test_no_hard_tier_is_ever_exceeded_and_the_answer_is_the_same_for_the_same_input(
    case: tuple[list[NodeState], list[object], list[PodRequest], NetworkConstraint, tuple[SubGroupPolicy, ...]],
) -> None:
    nodes, hypernodes, pods, gang, policies = case
    decision = decide_gang(nodes, hypernodes, pods, gang, policies)
    placed = {p.uid: p.node for p in decision.pods if p.node is not None}
    assert len(placed) in (0, len(pods))
    if placed:
        assert tier_of_nodes(set(placed.values())) <= (gang.highest_tier or 0)
        for number, policy in enumerate(policies):
            assert policy.network is not None
            role = "ab"[number]
            by_replica: dict[str, set[str]] = {}
            for p in pods:
                if p.labels["role"] == role:
                    by_replica.setdefault(p.labels["replica"], set()).add(placed[p.uid])
            if policy.network.mode is TopologyMode.HARD:
                assert all(tier_of_nodes(ns) <= (policy.network.highest_tier or 0) for ns in by_replica.values())
    again = decide_gang(list(reversed(nodes)), list(reversed(hypernodes)), list(reversed(pods)), gang, policies)
    assert again == decision


def test_a_subgroup_smaller_than_its_size_is_placed_with_the_whole_gang() -> None:
    # subGroupSize only says when a subgroup is ready; a gang that fits whole places every member.
    policy = SubGroupPolicy(name="r", match_label_keys=("replica",), sub_group_size=2, network=hard(1))
    pods = [
        pod("w-0", labels={"replica": "0"}),
        pod("w-1", labels={"replica": "0"}),
        pod("w-2", labels={"replica": "1"}),
    ]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(2), (policy,), min_member=1, minimum_placement=True)
    assert decision.placed and not decision.partial
    assert all(p.node is not None for p in decision.pods)
