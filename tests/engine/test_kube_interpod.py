"""InterPodAffinity through the engine, on tables written from kube-scheduler's documented behaviour
(interpodaffinity/filtering_test.go and scoring_test.go): each reason, the first-pod exception,
namespaces and namespaceSelector, matchLabelKeys / mismatchLabelKeys, and the normalised scores."""

from __future__ import annotations

from pod_topology_builders import ZONE, affinities, decide, incoming, kube_node, running, snapshot, term, verdicts

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def test_required_affinity_wants_a_matching_pod_in_the_nodes_domain() -> None:
    cluster = snapshot(
        kube_node("a1", "a", running("db", app="db")),
        kube_node("a2", "a"),
        kube_node("b1", "b"),
        kube_node("bare", None),  # no zone label: every term's key must be on the node
    )
    pod = incoming(labels={"app": "web"}, affinity=affinities(required=(term(ZONE, labels={"app": "db"}),)))
    decision = decide(cluster, pod)
    assert verdicts(decision) == {"a1": 0.0, "a2": 0.0, "b1": AFFINITY, "bare": AFFINITY}
    assert decision.node == "a1"
    assert decision.reason == ""


def test_the_first_pod_of_a_self_affine_group_goes_anywhere_with_the_key() -> None:
    cluster = snapshot(kube_node("a1", "a", running("x", app="other")), kube_node("b1", "b"), kube_node("bare", None))
    own = affinities(required=(term(ZONE, labels={"app": "web"}),))
    assert verdicts(decide(cluster, incoming(labels={"app": "web"}, affinity=own))) == {
        "a1": 0.0,
        "b1": 0.0,
        "bare": AFFINITY,
    }
    # a pod that does not match its own term gets no such exception
    refused = decide(cluster, incoming(labels={"app": "api"}, affinity=own))
    assert refused.node is None
    assert refused.reason == f"0/3 nodes are available: 3 {AFFINITY}."


def test_a_pod_counts_for_affinity_only_when_it_matches_every_term() -> None:
    terms = (term(ZONE, labels={"app": "db"}), term(ZONE, labels={"role": "primary"}))
    cluster = snapshot(
        kube_node("a1", "a", running("db", app="db")),  # matches the first term only
        kube_node("b1", "b", running("both", app="db", role="primary")),
    )
    assert verdicts(decide(cluster, incoming(affinity=affinities(required=terms)))) == {"a1": AFFINITY, "b1": 0.0}


def test_required_anti_affinity_one_per_node() -> None:
    cluster = snapshot(kube_node("n1", "a", running("w1", app="web")), kube_node("n2", "a"), kube_node("n3", None))
    pod = incoming(labels={"app": "web"}, affinity=affinities(anti=(term(labels={"app": "web"}),)))
    assert verdicts(decide(cluster, pod)) == {"n1": ANTI, "n2": 0.0, "n3": 0.0}


def test_existing_pods_anti_affinity_refuses_the_newcomer_in_their_domain() -> None:
    guard = affinities(anti=(term(ZONE, labels={"app": "web"}),))
    cluster = snapshot(
        kube_node("a1", "a", running("lonely", app="batch", affinity=guard)),
        kube_node("a2", "a"),
        kube_node("b1", "b"),
    )
    web = decide(cluster, incoming(labels={"app": "web"}))
    assert verdicts(web) == {"a1": EXISTING, "a2": EXISTING, "b1": 0.0}
    assert verdicts(decide(cluster, incoming(labels={"app": "api"}))) == {"a1": 0.0, "a2": 0.0, "b1": 0.0}


def test_term_namespaces_default_to_the_owner_pods() -> None:
    cluster = snapshot(
        kube_node("n1", "a", running("elsewhere", namespace="other", app="db")),
        kube_node("n2", "b", running("here", app="db")),
    )
    mine = incoming(affinity=affinities(required=(term(ZONE, labels={"app": "db"}),)))
    assert verdicts(decide(cluster, mine)) == {"n1": AFFINITY, "n2": 0.0}
    named = incoming(affinity=affinities(required=(term(ZONE, labels={"app": "db"}, namespaces=["other"]),)))
    assert verdicts(decide(cluster, named)) == {"n1": 0.0, "n2": AFFINITY}


def test_namespace_selector_reads_the_namespaces_labels() -> None:
    nodes = (
        kube_node("n1", "a", running("p1", namespace="team-a", app="db")),
        kube_node("n2", "b", running("p2", namespace="team-b", app="db")),
    )
    selector = {"matchLabels": {"team": "a"}}
    pod = incoming(affinity=affinities(required=(term(ZONE, labels={"app": "db"}, namespaceSelector=selector),)))
    labelled = snapshot(*nodes, namespaces={"team-a": {"team": "a"}, "team-b": {"team": "b"}})
    assert verdicts(decide(labelled, pod)) == {"n1": 0.0, "n2": AFFINITY}
    # an empty namespaceSelector selects every namespace
    every = incoming(affinity=affinities(anti=(term(ZONE, labels={"app": "db"}, namespaceSelector={}),)))
    assert verdicts(decide(labelled, every)) == {"n1": ANTI, "n2": ANTI}


def test_match_and_mismatch_label_keys_merge_the_pods_own_values() -> None:
    cluster = snapshot(
        kube_node("n1", "a", running("v1", app="web", version="1", tenant="x")),
        kube_node("n2", "b", running("v2", app="web", version="2", tenant="y")),
        kube_node("n3", "c"),
    )
    # one replica of *this* version per node: the other version's pod does not count
    same_version = term(labels={"app": "web"}, matchLabelKeys=["version"])
    pod = incoming(labels={"app": "web", "version": "2"}, affinity=affinities(anti=(same_version,)))
    assert verdicts(decide(cluster, pod)) == {"n1": 0.0, "n2": ANTI, "n3": 0.0}
    # keep away from other tenants' pods: tenant NotIn (mine)
    other_tenants = term(ZONE, labels={"app": "web"}, mismatchLabelKeys=["tenant"])
    pod = incoming(labels={"app": "web", "tenant": "x"}, affinity=affinities(anti=(other_tenants,)))
    assert verdicts(decide(cluster, pod)) == {"n1": 0.0, "n2": ANTI, "n3": 0.0}


def test_preferred_terms_score_normalised_and_weighted() -> None:
    cluster = snapshot(
        kube_node("n1", "a", running("c1", app="cache"), running("c2", app="cache")),
        kube_node("n2", "b", running("c3", app="cache")),
        kube_node("n3", "c"),
    )
    # raw scores 2 * 5, 1 * 5, 0 -> 100, 50, 0; InterPodAffinity weighs 2
    pod = incoming(affinity=affinities(preferred=((5, term(ZONE, labels={"app": "cache"})),)))
    decision = decide(cluster, pod)
    assert verdicts(decision) == {"n1": 200.0, "n2": 100.0, "n3": 0.0}
    assert decision.node == "n1"
    # anti-affinity: the fewest matching pods wins
    avoid = incoming(affinity=affinities(preferred_anti=((5, term(ZONE, labels={"app": "cache"})),)))
    assert verdicts(decide(cluster, avoid)) == {"n1": 0.0, "n2": 100.0, "n3": 200.0}


def test_existing_pods_terms_score_the_newcomer() -> None:
    # existing required affinity counts hardPodAffinityWeight (1); existing preferred terms their weight
    wants_web = affinities(required=(term(ZONE, labels={"app": "web"}),))
    likes_web = affinities(preferred=((3, term(ZONE, labels={"app": "web"})),))
    shuns_web = affinities(preferred_anti=((4, term(ZONE, labels={"app": "web"})),))
    cluster = snapshot(
        kube_node("n1", "a", running("r", app="x", affinity=wants_web)),  # +1
        kube_node("n2", "b", running("p", app="y", affinity=likes_web)),  # +3
        kube_node("n3", "c", running("q", app="z", affinity=shuns_web)),  # -4
        kube_node("n4", "d"),  # 0
    )
    # raw 1, 3, -4, 0 over [-4, 3]: 100 * 5/7 = 71, 100, 0, 100 * 4/7 = 57
    assert verdicts(decide(cluster, incoming(labels={"app": "web"}))) == {
        "n1": 142.0,
        "n2": 200.0,
        "n3": 0.0,
        "n4": 114.0,
    }


def test_scores_are_normalised_over_the_feasible_nodes_only() -> None:
    cluster = snapshot(
        kube_node("n1", "a", running("c1", app="cache"), running("c2", app="cache"), running("c3", app="cache")),
        kube_node("n2", "b", running("c4", app="cache")),
        kube_node("n3", "c"),
        kube_node("n4", "d", unschedulable=True),
    )
    pod = incoming(
        affinity=affinities(
            anti=(term(labels={"app": "cache"}),), preferred=((10, term(ZONE, labels={"app": "cache"})),)
        )
    )
    # n1 and n2 hold a cache pod (anti-affinity, hostname): only n3 is feasible, so it gets 0 of 0..0
    assert verdicts(decide(cluster, pod)) == {"n1": ANTI, "n2": ANTI, "n3": 0.0, "n4": "node(s) were unschedulable"}
