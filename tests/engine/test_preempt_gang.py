"""Gang preemption, on tables written from Volcano's gang preemption (one HyperNode domain at a time,
never above a hard tier) and KEP-5710's workload-aware preemption (a victim group goes whole or not at all).

Volcano's documented tree: ToRs s0..s3 (tier 1) of two 8-GPU nodes each, s4 and s5 (tier 2), s6 (tier 3).
"""

from __future__ import annotations

import msgspec
from preempt_gang_builders import GangCluster, gang, held, preempt_gang

from engine.decide.preempt import DisruptionBudget
from schemas.events.network import LabelSelector

ALL = tuple(range(8))


def packed(prio: dict[str, int]) -> GangCluster:
    """Every node held whole by one pod `p<i>` of the given priority (default 1)."""
    pods = [held(f"p{i}", f"node{i}", ALL, prio=prio.get(f"node{i}", 1), start=float(i)) for i in range(8)]
    return GangCluster(pods, {p.name: ALL for p in pods})


def victims(result: object) -> list[str]:
    return [v.pod for v in result.victims]  # type: ignore[attr-defined]


def test_the_lowest_tier_domain_of_least_cost_is_emptied() -> None:
    cluster = packed({"node0": 3, "node1": 3, "node2": 2, "node3": 2, "node4": 0, "node5": 0, "node6": 0})
    result = preempt_gang(cluster, gang(2, tier=1), 10)
    # s2 (nodes 4, 5) holds priority 0 pods only; s3's node7 holds a priority 1 pod
    assert (result.hypernode, result.tier) == ("s2", 1)
    assert sorted(victims(result)) == ["default/p4", "default/p5"]
    assert result.decision is not None and result.decision.placed
    assert {m.node for m in result.decision.pods} == {"node4", "node5"}


def test_never_above_the_hard_tier_soft_goes_up() -> None:
    # every ToR has one node held by a pod of the preemptor's priority: no ToR can be emptied
    cluster = packed({f"node{i}": 10 for i in (0, 2, 4, 6)})
    refused = preempt_gang(cluster, gang(2, tier=1), 10)
    assert refused.hypernode is None
    assert (
        refused.reason
        == "preemption: no hypernode of tier <= 1 holds gang ns/big after evicting its lower-priority pods"
    )
    soft = preempt_gang(cluster, gang(2, tier=1, soft=True), 10)
    assert soft.tier == 2 and soft.hypernode == "s4"
    assert sorted(victims(soft)) == ["default/p1", "default/p3"]


def test_only_strictly_lower_priority_pods_and_never_the_gangs_own() -> None:
    cluster = packed({"node0": 10, "node1": 9})
    result = preempt_gang(cluster, gang(2, tier=2, running_on=("node0",)), 10)
    # one member runs on node0 (pinning the gang under s0's ancestors); the other takes node1
    assert victims(result) == ["default/p1"]
    own = GangCluster([held("mine", "node0", ALL, prio=10, gang="ns/big")], {"mine": ALL})
    assert preempt_gang(own, gang(8, tier=3), 10).victims == ()


def test_a_victim_gang_below_its_minimum_goes_whole() -> None:
    # gang ns/low (minMember 2) runs on node0 and node6; emptying s0 takes its node0 member
    pods = [
        held("low-0", "node0", ALL, gang="ns/low", min_member=2),
        held("low-1", "node6", ALL, gang="ns/low", min_member=2),
        held("x1", "node1", ALL),
        *[held(f"h{i}", f"node{i}", ALL, prio=10) for i in (2, 3, 4, 5, 7)],
    ]
    cluster = GangCluster(pods, {p.name: ALL for p in pods})
    result = preempt_gang(cluster, gang(2, tier=1), 10)
    assert result.hypernode == "s0"
    assert sorted(victims(result)) == ["default/low-0", "default/low-1", "default/x1"]
    assert result.whole_gangs == ("ns/low",)
    assert "its gang ns/low goes whole" in result.victims[0].why + result.victims[1].why + result.victims[2].why


def test_spare_members_go_first_the_gang_keeps_its_minimum() -> None:
    # ns/low (minMember 2) has three members; one on node0 is spare: only it goes
    pods = [
        held("low-0", "node0", ALL, gang="ns/low", min_member=2),
        held("low-1", "node6", ALL, gang="ns/low", min_member=2),
        held("low-2", "node7", ALL, gang="ns/low", min_member=2),
        *[held(f"h{i}", f"node{i}", ALL, prio=10) for i in (1, 2, 3, 4, 5)],
    ]
    cluster = GangCluster(pods, {p.name: ALL for p in pods})
    result = preempt_gang(cluster, gang(1, tier=1), 10)
    assert victims(result) == ["default/low-0"]
    assert result.whole_gangs == ()
    assert "a spare member of ns/low" in result.victims[0].why


def test_a_victim_gang_with_a_member_of_higher_priority_loses_only_spare_members() -> None:
    pods = [
        held("low-0", "node0", ALL, gang="ns/mixed", min_member=2),
        held("low-1", "node1", ALL, gang="ns/mixed", min_member=2),
        held("top", "node6", ALL, prio=20, gang="ns/mixed", min_member=2),
        *[held(f"h{i}", f"node{i}", ALL, prio=10) for i in (2, 3, 4, 5, 7)],
    ]
    cluster = GangCluster(pods, {p.name: ALL for p in pods})
    # one spare member: one node of s0 can be freed, never both
    assert victims(preempt_gang(cluster, gang(1, tier=1), 10)) == ["default/low-1"]
    assert preempt_gang(cluster, gang(2, tier=1), 10).hypernode is None


def test_no_preemption_unless_the_whole_gang_then_fits() -> None:
    cluster = packed({})
    result = preempt_gang(cluster, gang(3, tier=1), 10)  # a ToR has two nodes
    assert result.hypernode is None and result.victims == ()


def test_budgets_then_priority_then_count_choose_the_domain() -> None:
    budget = DisruptionBudget(name="db", selector=LabelSelector(match_labels={"app": "db"}), disruptions_allowed=0)
    cluster = packed({})
    # s0, s1 and s2 each hold a pod whose budget allows no disruption: s3 violates none
    db = ("p0", "p2", "p4")
    labelled = [msgspec.structs.replace(p, labels={"app": "db"}) if p.name in db else p for p in cluster.pods]
    result = preempt_gang(GangCluster(labelled, cluster.gpus), gang(2, tier=1), 10, budgets=[budget])
    assert result.hypernode == "s3" and result.budget_violations == 0
    assert sorted(victims(result)) == ["default/p6", "default/p7"]


def test_preemption_policy_never() -> None:
    result = preempt_gang(packed({}), gang(2, tier=1), 10, policy="Never")
    assert result.hypernode is None
    assert result.reason == "preemption: not eligible due to preemptionPolicy=Never."


def test_device_aware_members_take_the_freed_quads() -> None:
    # node0: four pods of two GPUs each; a 4-GPU member needs one whole quad: two victims, the ones of one quad
    quads = {"a": (0, 1), "b": (2, 3), "c": (4, 5), "d": (6, 7)}
    pods = [held(n, "node0", g, start=float(i)) for i, (n, g) in enumerate(quads.items())]
    pods += [held(f"h{i}", f"node{i}", ALL, prio=10) for i in range(1, 8)]
    cluster = GangCluster(pods, {**quads, **{f"h{i}": ALL for i in range(1, 8)}})
    result = preempt_gang(cluster, gang(1, 4, tier=1), 10)
    assert result.hypernode == "s0"
    assert sorted(victims(result)) in (["default/a", "default/b"], ["default/c", "default/d"])
