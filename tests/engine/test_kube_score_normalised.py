"""NodeAffinity (weight 2) and TaintToleration (weight 3) for a pod no device vendor claims, normalised over
the feasible nodes as kube-scheduler normalises them (DefaultNormalizeScore); tables from
nodeaffinity/node_affinity_test.go and tainttoleration/taint_toleration_test.go. TaintToleration counts
less its constant 100 (3 * (score - 100)), so a node without untolerated PreferNoSchedule taints adds 0.
A GPU pod keeps the raw terms (preferred weights, -100 per untolerated taint) under its device score.
"""

from __future__ import annotations

import msgspec
from engine_builders import gpu, node
from pod_topology_builders import decide, verdicts

from engine import NodeState, PodRequest, Snapshot
from schemas.kube import (
    Affinity,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
)

PREFER = "PreferNoSchedule"


def preferring(*terms: tuple[int, dict[str, str]]) -> Affinity:
    preferred = tuple(
        PreferredSchedulingTerm(
            weight=weight,
            preference=NodeSelectorTerm(
                match_expressions=tuple(
                    NodeSelectorRequirement(key=k, operator="In", values=(v,)) for k, v in labels.items()
                )
            ),
        )
        for weight, labels in terms
    )
    return Affinity(node_affinity=NodeAffinity(preferred_during_scheduling_ignored_during_execution=preferred))


KUBE_TERMS = preferring((2, {"foo": "bar"}), (4, {"key": "value"}), (5, {"foo": "bar", "key": "value", "az": "az1"}))


def test_node_affinity_preferences_normalised_and_weighted_2() -> None:
    # node1 matches weight 2, node5 weight 4, node2 all three (11): 100 * 2 / 11 = 18, 36, 100; times 2
    nodes = (
        NodeState(name="node1", labels={"foo": "bar"}),
        NodeState(name="node2", labels={"foo": "bar", "key": "value", "az": "az1"}),
        NodeState(name="node5", labels={"key": "value"}),
        NodeState(name="node6"),
    )
    decision = decide(Snapshot(nodes=nodes), PodRequest(uid="p", affinity=KUBE_TERMS))
    assert verdicts(decision) == {"node1": 36.0, "node2": 200.0, "node5": 72.0, "node6": 0.0}


def test_the_highest_is_taken_over_the_feasible_nodes_only() -> None:
    cordoned = NodeState(name="best", labels={"foo": "bar", "key": "value", "az": "az1"}, unschedulable=True)
    nodes = (cordoned, NodeState(name="node1", labels={"foo": "bar"}), NodeState(name="node5", labels={"key": "value"}))
    decision = decide(Snapshot(nodes=nodes), PodRequest(uid="p", affinity=KUBE_TERMS))
    assert verdicts(decision) == {"best": "node(s) were unschedulable", "node1": 100.0, "node5": 200.0}


def tainted(name: str, *keys: str) -> NodeState:
    return NodeState(name=name, taints=tuple(Taint(key=k, value="v", effect=PREFER) for k in keys))


def test_taint_toleration_prefers_fewer_untolerated_prefer_no_schedule_taints() -> None:
    # taint_toleration_test.go: 0, 1 and 2 untolerated taints -> 100, 50, 0; weighted 3, less the constant
    nodes = (tainted("a"), tainted("b", "cpu-type"), tainted("c", "cpu-type", "disk-type"), tainted("d", "tolerated"))
    pod = PodRequest(uid="p", tolerations=(Toleration(key="tolerated", operator="Exists", effect=PREFER),))
    decision = decide(Snapshot(nodes=nodes), pod)
    assert verdicts(decision) == {"a": 0.0, "b": -150.0, "c": -300.0, "d": 0.0}
    assert decision.node == "a"


def test_affinity_and_taints_add_up_as_kubes_weights_say() -> None:
    # The raw terms tie a and b (weight 100 less one taint's 100); kube's weights put a ahead (b: 2 * 100 less
    # 3 * 100). With c holding two taints, b's one is half the highest: b (200 - 150) goes ahead of a.
    nodes = (tainted("a"), msgspec.structs.replace(tainted("b", "t"), labels={"foo": "bar"}))
    pod = PodRequest(uid="p", affinity=preferring((100, {"foo": "bar"})))
    decision = decide(Snapshot(nodes=nodes), pod)
    assert verdicts(decision) == {"a": 0.0, "b": 200.0 - 300.0}
    assert decision.node == "a"
    decision = decide(Snapshot(nodes=(*nodes, tainted("c", "t", "u"))), pod)
    assert verdicts(decision) == {"a": 0.0, "b": 200.0 - 150.0, "c": -300.0}
    assert decision.node == "b"


def test_a_gpu_pod_keeps_the_raw_terms_under_its_device_score() -> None:
    plain = node("a", [gpu(0)])
    liked = msgspec.structs.replace(node("b", [gpu(0)]), labels={"foo": "bar"})
    pod = PodRequest(uid="g", requests={"nvidia.com/gpu": "1"}, affinity=preferring((7, {"foo": "bar"})))
    decision = decide(Snapshot(nodes=(plain, liked)), pod)
    assert decision.node == "b"
    assert decision.score_parts["preference"] == 7.0
