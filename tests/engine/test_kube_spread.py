"""PodTopologySpread through the engine, on tables written from kube-scheduler's documented behaviour
(podtopologyspread/filtering_test.go, scoring_test.go, and the topology spread constraints page):
skew, minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys, the missing-label reason,
ScheduleAnyway scores and the cluster-default constraints."""

from __future__ import annotations

import math

from pod_topology_builders import HOSTNAME, ZONE, decide, incoming, kube_node, running, snapshot, spread, verdicts

from engine.core.model import PlacedPod
from schemas.kube import LabelSelector, Taint

SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING = f"{SPREAD} (missing required label)"
FOO = {"foo": ""}


def test_skew_over_the_global_minimum_refuses_the_crowded_zone() -> None:
    # the documentation's example: zone A holds 2 matching pods, zone B none; maxSkew 1
    cluster = snapshot(
        kube_node("node1", "A", running("p1", foo=""), running("p2", foo="")),
        kube_node("node2", "A"),
        kube_node("node3", "B"),
        kube_node("node4", "B"),
        kube_node("nozone", None),
    )
    pod = incoming(labels=FOO, constraints=(spread(ZONE, labels=FOO),))
    assert verdicts(decide(cluster, pod)) == {
        "node1": SPREAD,
        "node2": SPREAD,
        "node3": 0.0,
        "node4": 0.0,
        "nozone": MISSING,
    }
    # maxSkew 2 lets zone A take one more (2 + 1 - 0 = 3 > 2 still refuses; 3 allows it)
    wide = incoming(labels=FOO, constraints=(spread(ZONE, 3, labels=FOO),))
    assert verdicts(decide(cluster, wide))["node1"] == 0.0


def test_a_pod_outside_its_own_selector_adds_nothing_to_the_skew() -> None:
    cluster = snapshot(kube_node("n1", "A", running("p1", foo="")), kube_node("n2", "B"))
    pod = incoming(labels={"bar": ""}, constraints=(spread(ZONE, labels=FOO),))
    assert verdicts(decide(cluster, pod)) == {"n1": 0.0, "n2": 0.0}  # 1 + 0 - 0 = 1, not over 1


def test_pods_of_other_namespaces_do_not_count() -> None:
    cluster = snapshot(kube_node("n1", "A", running("p1", namespace="other", foo="")), kube_node("n2", "B"))
    pod = incoming(labels=FOO, constraints=(spread(ZONE, 0 + 1, labels=FOO),))
    assert verdicts(decide(cluster, pod)) == {"n1": 0.0, "n2": 0.0}


def test_min_domains_makes_the_minimum_zero_when_too_few_domains() -> None:
    cluster = snapshot(kube_node("n1", "A", running("p1", foo="")), kube_node("n2", "B", running("p2", foo="")))
    enough = incoming(labels=FOO, constraints=(spread(ZONE, labels=FOO, minDomains=2),))
    assert verdicts(decide(cluster, enough)) == {"n1": 0.0, "n2": 0.0}  # 1 + 1 - 1
    too_few = incoming(labels=FOO, constraints=(spread(ZONE, labels=FOO, minDomains=3),))
    refused = decide(cluster, too_few)
    assert verdicts(refused) == {"n1": SPREAD, "n2": SPREAD}  # 1 + 1 - 0 > 1
    assert refused.reason == f"0/2 nodes are available: 2 {SPREAD}."


def test_node_affinity_policy_honor_leaves_unselected_domains_out() -> None:
    # zone C is empty but the pod's nodeSelector excludes it: with Honor it is no domain, so the minimum is 1
    cluster = snapshot(
        kube_node("a", "A", running("p1", foo=""), labels={"pool": "x"}),
        kube_node("b", "B", running("p2", foo=""), labels={"pool": "x"}),
        kube_node("c", "C"),
    )
    honor = incoming(labels=FOO, node_selector={"pool": "x"}, constraints=(spread(ZONE, labels=FOO),))
    assert verdicts(decide(cluster, honor))["a"] == 0.0
    ignore = incoming(
        labels=FOO, node_selector={"pool": "x"}, constraints=(spread(ZONE, labels=FOO, nodeAffinityPolicy="Ignore"),)
    )
    assert verdicts(decide(cluster, ignore))["a"] == SPREAD  # zone C counts: 1 + 1 - 0 > 1


def test_node_taints_policy_honor_leaves_tainted_domains_out() -> None:
    taint = (Taint(key="dedicated", value="gpu", effect="NoSchedule"),)
    cluster = snapshot(kube_node("a", "A", running("p1", foo="")), kube_node("t", "T", taints=taint))
    ignore = incoming(labels=FOO, constraints=(spread(ZONE, labels=FOO),))  # the default: Ignore
    assert verdicts(decide(cluster, ignore))["a"] == SPREAD
    honor = incoming(labels=FOO, constraints=(spread(ZONE, labels=FOO, nodeTaintsPolicy="Honor"),))
    assert verdicts(decide(cluster, honor))["a"] == 0.0


def test_match_label_keys_count_only_the_same_revision() -> None:
    cluster = snapshot(
        kube_node("n1", "A", running("old1", app="web", hash="v1"), running("old2", app="web", hash="v1")),
        kube_node("n2", "B"),
    )
    plain = incoming(labels={"app": "web", "hash": "v2"}, constraints=(spread(ZONE, labels={"app": "web"}),))
    assert verdicts(decide(cluster, plain))["n1"] == SPREAD
    keyed = spread(ZONE, labels={"app": "web"}, matchLabelKeys=["hash"])
    pod = incoming(labels={"app": "web", "hash": "v2"}, constraints=(keyed,))
    assert verdicts(decide(cluster, pod)) == {"n1": 0.0, "n2": 0.0}


def test_schedule_anyway_scores_the_emptier_domain_higher() -> None:
    cluster = snapshot(
        kube_node("a1", "A", running("p1", foo=""), running("p2", foo="")),
        kube_node("b1", "B"),
        kube_node("nozone", None),
    )
    pod = incoming(labels=FOO, constraints=(spread(ZONE, hard=False, labels=FOO),))
    # 2 domains: weight log(4); a1: round(2 * 1.386 + 0) = 3, b1: 0 -> 100 * (3 - 3) / 3 = 0 and 100;
    # a node lacking the key is not scored (0)
    assert round(2 * math.log(4)) == 3
    decision = decide(cluster, pod)
    assert verdicts(decision) == {"a1": 0.0, "b1": 200.0, "nozone": 0.0}
    assert decision.node == "b1"


def test_cluster_default_constraints_apply_to_a_pod_its_owners_select() -> None:
    selector = LabelSelector(match_labels={"app": "web"})
    cluster = snapshot(
        kube_node("a1", "A", *(running(f"w{i}", app="web") for i in range(3))),
        kube_node("a2", "A"),
        kube_node("b1", "B", running("w9", app="web")),
        kube_node("nozone", None),
    )
    pod = incoming(labels={"app": "web"}, default_spread_selector=selector)
    # hostname (maxSkew 3, 4 nodes: log 6) + zone (maxSkew 5, domains A, B and "": log 5)
    hw, zw = math.log(6), math.log(5)
    raw = {
        "a1": round(3 * hw + 2 + 3 * zw + 4),
        "a2": round(0 * hw + 2 + 3 * zw + 4),
        "b1": round(1 * hw + 2 + 1 * zw + 4),
        "nozone": round(0 * hw + 2),  # no zone label: only the hostname constraint
    }
    high, low = max(raw.values()), min(raw.values())
    expected = {n: 2.0 * (100 * (high + low - s) // high) for n, s in raw.items()}
    decision = decide(cluster, pod)
    assert verdicts(decision) == expected
    assert decision.node == "nozone"
    # no owner selector: no default constraints, every node 0
    assert set(verdicts(decide(cluster, incoming(labels={"app": "web"}))).values()) == {0.0}


def test_hostname_spread_is_one_per_node_with_max_skew_1() -> None:
    cluster = snapshot(kube_node("n1", None, running("p", foo="")), kube_node("n2", None))
    pod = incoming(labels=FOO, constraints=(spread(HOSTNAME, labels=FOO),))
    assert verdicts(decide(cluster, pod)) == {"n1": SPREAD, "n2": 0.0}


def test_a_pod_being_deleted_no_longer_counts() -> None:
    leaving = PlacedPod(uid="old", labels=FOO, terminating=True)
    cluster = snapshot(
        kube_node("n1", "A", leaving, running("p1", foo="")), kube_node("n2", "B", running("p2", foo=""))
    )
    pod = incoming(labels=FOO, constraints=(spread(ZONE, labels=FOO),))
    assert verdicts(decide(cluster, pod)) == {"n1": 0.0, "n2": 0.0}  # A counts 1, not 2
