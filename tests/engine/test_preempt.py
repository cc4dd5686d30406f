"""Preemption for one pod, on tables written from kube-scheduler's DefaultPreemption semantics.

Candidates (a node is one only where removing pods can cure its failure), victims (strictly lower
priority), the reprieve order (budget-violating pods first, then by priority, then start time), the
node order of pickOneNodeForPreemption, PodDisruptionBudgets, preemptionPolicy Never, a nominated pod
waiting for its victims, and the device-aware choice of victims on a node of NVLink quads.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from engine_builders import ENGINE
from preempt_builders import built_node, preemptor, running

from engine import NodeState, Snapshot
from engine.decide.preempt import CountOnly, DisruptionBudget, Preemption, Preemptor, RunningPod
from schemas.events.network import LabelSelector
from schemas.kube import Taint

DB_BUDGET = DisruptionBudget(name="db", selector=LabelSelector(match_labels={"app": "db"}), disruptions_allowed=0)


def preempt(nodes: Sequence[NodeState], pods: Sequence[RunningPod], pod: Preemptor,
            budgets: Sequence[DisruptionBudget] = ()) -> Preemption:  # fmt: skip
    return ENGINE.preempt(Snapshot(nodes=tuple(nodes)), pod, pods, budgets)


def victims(result: Preemption) -> list[str]:
    return [v.pod for v in result.victims]


def cluster(*pods: RunningPod, **nodes: dict[str, object]) -> tuple[list[NodeState], list[RunningPod]]:
    """Nodes named by the keywords (their options), with `pods` running on them."""
    return [built_node(name, pods, **opts) for name, opts in sorted(nodes.items())], list(pods)  # type: ignore[arg-type]


# --- victims on one node: who may be evicted, and the reprieve -------------------------------------------------


def test_only_strictly_lower_priority_pods_are_victims() -> None:
    nodes, pods = cluster(
        running("same", "a", prio=10, cpu="2"), running("low", "a", prio=1, cpu="2"), a={}
    )  # fmt: skip
    result = preempt(nodes, pods, preemptor(10, cpu="2"))
    assert (result.node, victims(result)) == ("a", ["default/low"])
    # needing both pods' room, the equal-priority pod is never evicted: no candidate
    refused = preempt(nodes, pods, preemptor(10, cpu="4"))
    assert refused.node is None
    assert refused.reason == "preemption: 0/1 nodes are available: 1 Insufficient cpu."


def test_no_lower_priority_pod_no_victims_found() -> None:
    nodes, pods = cluster(running("high", "a", prio=100, cpu="4"), a={})
    result = preempt(nodes, pods, preemptor(50, cpu="1"))
    assert result.node is None
    assert result.reason == "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."


def test_reprieve_keeps_the_most_important_pods() -> None:
    # 4 CPUs full with four 1-CPU pods; the preemptor needs 2: the two least important go.
    nodes, pods = cluster(
        running("p5", "a", prio=5, cpu="1"), running("p3", "a", prio=3, cpu="1"),
        running("p1", "a", prio=1, cpu="1"), running("p4", "a", prio=4, cpu="1"), a={},
    )  # fmt: skip
    result = preempt(nodes, pods, preemptor(10, cpu="2"))
    assert victims(result) == ["default/p3", "default/p1"]  # most important first


def test_equal_priority_the_later_started_goes() -> None:
    nodes, pods = cluster(
        running("old", "a", prio=1, start=100.0, cpu="2"), running("young", "a", prio=1, start=200.0, cpu="2"), a={}
    )  # fmt: skip
    assert victims(preempt(nodes, pods, preemptor(10, cpu="2"))) == ["default/young"]


def test_budget_violating_pods_are_reprieved_first() -> None:
    # The db pod is protected by a budget allowing no disruption: it is put back first, so the
    # more important web pod is the victim and no budget is violated.
    nodes, pods = cluster(
        running("db", "a", prio=1, cpu="2", labels={"app": "db"}), running("web", "a", prio=5, cpu="2"), a={}
    )  # fmt: skip
    result = preempt(nodes, pods, preemptor(10, cpu="2"), [DB_BUDGET])
    assert (victims(result), result.budget_violations) == (["default/web"], 0)


def test_a_violation_that_cannot_be_avoided_is_counted() -> None:
    nodes, pods = cluster(
        running("db", "a", prio=1, cpu="2", labels={"app": "db"}), running("web", "a", prio=5, cpu="2"), a={}
    )  # fmt: skip
    result = preempt(nodes, pods, preemptor(10, cpu="4"), [DB_BUDGET])
    assert (sorted(victims(result)), result.budget_violations) == (["default/db", "default/web"], 1)
    assert [v.violates_budget for v in result.victims] == [False, True]
    assert "PodDisruptionBudget" in result.victims[1].why


@pytest.mark.parametrize(
    ("budget", "violates"),
    [
        (DB_BUDGET, True),
        (DisruptionBudget(name="db", selector=LabelSelector(match_labels={"app": "db"}), disruptions_allowed=1), False),
        (DisruptionBudget(name="db", selector=None, disruptions_allowed=0), False),  # nil selector: selects nothing
        (DisruptionBudget(name="db", selector=LabelSelector(), disruptions_allowed=0), False),  # empty: nothing
        (DisruptionBudget(namespace="other", name="db", selector=DB_BUDGET.selector), False),  # another namespace
        (DisruptionBudget(name="db", selector=DB_BUDGET.selector, disrupted_pods=("db",)), False),  # counted already
    ],
)
def test_budgets_as_upstream_reads_them(budget: DisruptionBudget, violates: bool) -> None:
    nodes, pods = cluster(running("db", "a", prio=1, cpu="4", labels={"app": "db"}), a={})
    result = preempt(nodes, pods, preemptor(10, cpu="4"), [budget])
    assert result.budget_violations == (1 if violates else 0)


def test_host_port_is_freed_by_eviction() -> None:
    nodes, pods = cluster(running("web", "a", prio=1, port=80), running("other", "a", prio=1), a={})
    result = preempt(nodes, pods, preemptor(10, port=80))
    assert victims(result) == ["default/web"]


# --- candidates: what no eviction cures -------------------------------------------------------------------------


def test_nodes_removal_cannot_help_are_no_candidates() -> None:
    taint = Taint(key="dedicated", value="infra", effect="NoSchedule")
    nodes, pods = cluster(
        running("t", "tainted", prio=1, cpu="4"), running("c", "cordoned", prio=1, cpu="4"),
        running("l", "elsewhere", prio=1, cpu="4"), running("h", "high", prio=100, cpu="4"),
        tainted={"taints": (taint,), "labels": {"zone": "a"}},
        cordoned={"unschedulable": True, "labels": {"zone": "a"}},
        elsewhere={"labels": {"zone": "b"}}, high={"labels": {"zone": "a"}},
    )  # fmt: skip
    result = preempt(nodes, pods, preemptor(10, cpu="2", node_selector={"zone": "a"}))
    assert result.node is None
    assert result.reason == (
        "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod,"
        " 3 Preemption is not helpful for scheduling."
    )


def test_still_not_fitting_without_every_victim() -> None:
    nodes, pods = cluster(running("low", "a", prio=1, cpu="2"), running("high", "a", prio=100, cpu="2"), a={})
    result = preempt(nodes, pods, preemptor(10, cpu="3"))
    assert result.reason == "preemption: 0/1 nodes are available: 1 Insufficient cpu."


# --- eligibility -----------------------------------------------------------------------------------------------


def test_preemption_policy_never_never_preempts() -> None:
    nodes, pods = cluster(running("low", "a", prio=1, cpu="4"), a={})
    result = preempt(nodes, pods, preemptor(10, cpu="2", policy="Never"))
    assert (result.node, result.victims) == (None, ())
    assert result.reason == "preemption: not eligible due to preemptionPolicy=Never."


def test_a_nominated_pod_waits_for_its_victims() -> None:
    nodes, pods = cluster(
        running("going", "a", prio=1, cpu="2", terminating=True), running("low", "a", prio=1, cpu="2"),
        running("low-b", "b", prio=1, cpu="4"), a={}, b={},
    )  # fmt: skip
    result = preempt(nodes, pods, preemptor(10, cpu="4", nominated="a"))
    assert result.reason == "preemption: not eligible due to a terminating pod on the nominated node."
    # not nominated: it preempts as any pod
    assert preempt(nodes, pods, preemptor(10, cpu="4")).node is not None


def test_nominated_to_a_node_it_can_no_longer_use_preempts_again() -> None:
    taint = Taint(key="dedicated", value="infra", effect="NoSchedule")
    nodes, pods = cluster(
        running("going", "a", prio=1, cpu="4", terminating=True), running("low-b", "b", prio=1, cpu="4"),
        a={"taints": (taint,)}, b={},
    )  # fmt: skip
    result = preempt(nodes, pods, preemptor(10, cpu="4", nominated="a"))
    assert (result.node, victims(result)) == ("b", ["default/low-b"])


def test_a_terminating_pod_of_higher_priority_does_not_hold_the_nominated_pod() -> None:
    nodes, pods = cluster(
        running("going", "a", prio=50, cpu="2", terminating=True), running("low", "a", prio=1, cpu="2"), a={}
    )
    result = preempt(nodes, pods, preemptor(10, cpu="2", nominated="a"))
    assert victims(result) == ["default/low"]


# --- the node: pickOneNodeForPreemption's order ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("a_pods", "b_pods", "budgets", "chosen"),
    [
        # fewest budget violations, before any priority
        ([running("x", "a", prio=1, cpu="4", labels={"app": "db"})], [running("y", "b", prio=5, cpu="4")],
         [DB_BUDGET], "b"),
        # the lowest highest-victim priority
        ([running("x", "a", prio=5, cpu="4")], [running("y", "b", prio=3, cpu="4")], [], "b"),
        # then the smallest sum of priorities
        ([running("x1", "a", prio=3, cpu="2"), running("x2", "a", prio=2, cpu="2")],
         [running("y1", "b", prio=3, cpu="2"), running("y2", "b", prio=1, cpu="2")], [], "b"),
        # then the fewest victims (priorities offset by 2^31: one victim sums less than two)
        ([running("x1", "a", prio=3, cpu="2"), running("x2", "a", prio=0, cpu="2")],
         [running("y1", "b", prio=3, cpu="4")], [], "b"),
        # then the latest start of the highest-priority victims
        ([running("x", "a", prio=3, start=100.0, cpu="4")], [running("y", "b", prio=3, start=200.0, cpu="4")], [], "b"),
        ([running("x", "a", prio=3, start=300.0, cpu="4")], [running("y", "b", prio=3, start=200.0, cpu="4")], [], "a"),
        # all equal: the first node by name
        ([running("x", "a", prio=3, cpu="4")], [running("y", "b", prio=3, cpu="4")], [], "a"),
    ],
)  # fmt: skip
def test_node_order(a_pods: list[RunningPod], b_pods: list[RunningPod], budgets: list[DisruptionBudget],
                    chosen: str) -> None:  # fmt: skip
    nodes, pods = cluster(*a_pods, *b_pods, a={}, b={})
    result = preempt(nodes, pods, preemptor(10, cpu="4"), budgets)
    assert result.node == chosen
    # every node tried: both are candidates, the same one wins (by default only the nodes that can win are)
    every = ENGINE.preempt(Snapshot(nodes=tuple(nodes)), preemptor(10, cpu="4"), pods, budgets, every_node=True)
    assert {c.node for c in every.candidates} == {"a", "b"}
    assert (every.node, every.victims) == (result.node, result.victims)
    assert result.candidates[0].node == chosen


def test_the_preemptor_is_placed_on_the_node_without_its_victims() -> None:
    nodes, pods = cluster(running("low", "a", prio=1, cpu="4"), a={})
    result = preempt(nodes, pods, preemptor(10, cpu="4"))
    assert result.decision is not None and result.decision.node == "a"
    assert result.victims[0].why == "priority 1 < 10"


# --- devices decide which pods go -----------------------------------------------------------------------------


def test_evict_the_two_pods_that_free_one_quad() -> None:
    """Four pods hold two GPUs each, two per NVLink quad; the preemptor wants four GPUs.

    kube's reprieve (a count of GPUs) puts back the most important first: D (6) and A (5), then C (2)
    and B (1) cannot come back, so it evicts B and C and frees GPUs 2, 3, 4, 5: two halves of two
    quads, linked by SYS alone. Evicting A and B frees the quad 0-3 whole."""
    gpus = {"a": (0, 1), "b": (2, 3), "c": (4, 5), "d": (6, 7)}
    pods = [running("a", "n", prio=5, gpus=gpus["a"]), running("b", "n", prio=1, gpus=gpus["b"]),
            running("c", "n", prio=2, gpus=gpus["c"]), running("d", "n", prio=6, gpus=gpus["d"])]  # fmt: skip
    node = built_node("n", pods, devices=True, gpus=gpus)
    result = preempt([node], pods, preemptor(10, gpus=4))
    assert sorted(victims(result)) == ["default/a", "default/b"]
    assert result.decision is not None
    assert sorted(d.index for d in result.decision.devices) == [0, 1, 2, 3]
    # the device-blind choice: with B and C gone the preemptor's best set spans both quads
    blind = ENGINE.place(Snapshot(nodes=(built_node("n", [pods[0], pods[3]], devices=True, gpus=gpus),)),
                         preemptor(10, gpus=4).request)  # fmt: skip
    assert sorted(d.index for d in blind.devices) == [2, 3, 4, 5]
    assert blind.score_parts["set_score"] < result.decision.score_parts["set_score"]
    assert all("frees device(s)" in v.why for v in result.victims)
    # the explanation names kube's choice and what it would have given
    assert result.count_only == CountOnly(
        victims=("default/c", "default/b"),
        set_score=blind.score_parts["set_score"],
        set_score_chosen=result.decision.score_parts["set_score"],
    )


def test_single_gpu_pods_free_an_nvlink_pair_not_two_quads() -> None:
    """Eight one-GPU pods; the two least important sit on GPU 3 and GPU 4 (different quads).
    kube would evict those two (a SYS pair); the preemptor gets an NVLink pair instead, evicting the
    least important pod that shares a quad with another cheap one."""
    prios = {0: 9, 1: 8, 2: 3, 3: 1, 4: 2, 5: 7, 6: 6, 7: 5}
    pods = [running(f"g{i}", "n", prio=p, gpus=(i,)) for i, p in prios.items()]
    gpus = {f"g{i}": (i,) for i in prios}
    node = built_node("n", pods, devices=True, gpus=gpus)
    result = preempt([node], pods, preemptor(10, gpus=2))
    assert result.decision is not None
    chosen = sorted(d.index for d in result.decision.devices)
    assert any(set(chosen) <= set(q) for q in ((0, 1, 2, 3), (4, 5, 6, 7)))
    assert sorted(victims(result)) == ["default/g2", "default/g3"]  # GPUs 2 and 3: the cheapest pair in a quad


def test_a_pod_without_devices_keeps_kubes_reprieve_on_a_gpu_node() -> None:
    gpus = {"a": (0, 1), "b": (4, 5)}
    pods = [running("a", "n", prio=5, cpu="2", gpus=gpus["a"]), running("b", "n", prio=1, cpu="2", gpus=gpus["b"])]
    node = built_node("n", pods, devices=True, gpus=gpus)
    result = preempt([node], pods, preemptor(10, cpu="2"))
    assert (victims(result), result.count_only) == (["default/b"], None)


# --- kube-scheduler's own candidate-selection scenarios (TestSelectBestCandidate), in our units -----------------
# A node of 5 CPUs, pods of 1 (small), 2 (medium) and 3 (large) CPUs, a preemptor of 5 CPUs: every
# lower-priority pod of the chosen node goes. Priorities as upstream's: -100, 0, 100, 1000, 10000.
NEG, LOW, MID, HIGH = -100, 0, 100, 1000
SMALL, MEDIUM, LARGE = "1", "2", "3"

UPSTREAM_CASES: dict[str, tuple[list[tuple[str, int, str, float]], str]] = {
    # name: ([(node, priority, cpu, start time)], the node chosen)
    "node with min highest priority pod is picked": (
        [("n1", MID, MEDIUM, 0), ("n1", MID, LARGE, 0), ("n2", MID, MEDIUM, 0), ("n2", LOW, MEDIUM, 0),
         ("n3", LOW, MEDIUM, 0), ("n3", LOW, MEDIUM, 0)], "n3"),
    "when highest priorities are the same, minimum sum of priorities is picked": (
        [("n1", MID, MEDIUM, 0), ("n1", MID, LARGE, 0), ("n2", MID, LARGE, 0), ("n2", LOW, MEDIUM, 0),
         ("n3", MID, MEDIUM, 0), ("n3", MID, MEDIUM, 0)], "n2"),
    "sum of adjusted priorities is considered": (
        [("n1", MID, SMALL, 0), ("n1", NEG, SMALL, 0), ("n1", NEG, SMALL, 0), ("n2", MID, LARGE, 0),
         ("n2", NEG, MEDIUM, 0), ("n3", MID, MEDIUM, 0), ("n3", NEG, SMALL, 0), ("n3", LOW, SMALL, 0)], "n2"),
    "non-overlapping lowest high priority, sum priorities, and number of pods": (
        [("n1", MID, SMALL, 0), ("n1", LOW, SMALL, 0), ("n1", LOW, SMALL, 0), ("n2", HIGH, LARGE, 0),
         ("n3", MID, MEDIUM, 0), ("n3", LOW, SMALL, 0), ("n3", LOW, SMALL, 0), ("n3", LOW, MEDIUM, 0),
         ("n4", MID, MEDIUM, 0), ("n4", MID, SMALL, 0), ("n4", MID, SMALL, 0), ("n4", NEG, SMALL, 0)], "n1"),
    "same priority, same number of victims, different start time for each node's pod": (
        [("n1", MID, MEDIUM, 2), ("n1", MID, MEDIUM, 2), ("n2", MID, MEDIUM, 3), ("n2", MID, MEDIUM, 3),
         ("n3", MID, MEDIUM, 1), ("n3", MID, MEDIUM, 1)], "n2"),
    "same priority, same number of victims, different start time for all pods": (
        [("n1", MID, MEDIUM, 4), ("n1", MID, MEDIUM, 2), ("n2", MID, MEDIUM, 5), ("n2", MID, MEDIUM, 1),
         ("n3", MID, MEDIUM, 3), ("n3", MID, MEDIUM, 6)], "n3"),
    "different priority, same number of victims, different start time for all pods": (
        [("n1", LOW, MEDIUM, 4), ("n1", MID, MEDIUM, 2), ("n2", MID, MEDIUM, 6), ("n2", LOW, MEDIUM, 1),
         ("n3", LOW, MEDIUM, 3), ("n3", MID, MEDIUM, 5)], "n2"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(UPSTREAM_CASES))
def test_kube_schedulers_candidate_selection(case: str) -> None:
    specs, chosen = UPSTREAM_CASES[case]
    pods = [running(f"p{i}", node, prio=prio, cpu=cpu, start=start) for i, (node, prio, cpu, start) in enumerate(specs)]
    names = sorted({node for node, *_ in specs})
    nodes = [built_node(name, pods, cpu="5") for name in names]
    result = preempt(nodes, pods, preemptor(HIGH if "non-overlapping" not in case else 10 * HIGH, cpu="5"))
    assert result.node == chosen
