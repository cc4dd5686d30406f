"""The indexed InterPodAffinity and PodTopologySpread give the answers of the straightforward evaluation
(pod_topology_reference.py: every node, every running pod) on random small clusters, also after the
index was updated from an earlier state of the cluster (pods added and removed, nodes relabelled)."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from pod_topology_builders import HOSTNAME, ZONE, affinities, decide, incoming, snapshot, spread, term, verdicts
from pod_topology_reference import Reference

from engine import Engine, NodeState, PodRequest
from engine.cluster.pods import TermKind
from engine.core.labels import selector_of
from engine.core.model import PlacedPod
from engine.decide.node_rules import PodRules
from schemas.kube import LabelSelector, PodAffinities, Taint, Toleration, TopologySpreadConstraint

KEYS = (HOSTNAME, ZONE)
APPS = ("web", "db")
TAINT = Taint(key="dedicated", value="x", effect="NoSchedule")

selectors = st.sampled_from(APPS).map(lambda app: {"app": app})
terms = st.builds(
    lambda key, labels, ns, keys: term(key, labels=labels, **ns, **keys),
    st.sampled_from(KEYS),
    selectors,
    st.sampled_from(
        (
            {},
            {"namespaces": ["other"]},
            {"namespaceSelector": {"matchLabels": {"team": "a"}}},
            {"namespaceSelector": {}},
        )
    ),  # fmt: skip
    st.sampled_from(({}, {"matchLabelKeys": ["ver"]}, {"mismatchLabelKeys": ["ver"]})),
)
weighted = st.tuples(st.integers(1, 100), terms)
pod_affinities = st.builds(
    lambda r, a, p, q: affinities(required=tuple(r), anti=tuple(a), preferred=tuple(p), preferred_anti=tuple(q)),
    st.lists(terms, max_size=2),
    st.lists(terms, max_size=2),
    st.lists(weighted, max_size=2),
    st.lists(weighted, max_size=2),
)
constraints = st.builds(
    lambda key, skew, hard, labels, extra: spread(
        key, skew, hard=hard or "minDomains" in extra, labels=labels, **extra
    ),
    st.sampled_from(KEYS),
    st.integers(1, 3),
    st.booleans(),
    selectors,
    st.sampled_from(
        (
            {},
            {"minDomains": 3},
            {"nodeAffinityPolicy": "Ignore"},
            {"nodeTaintsPolicy": "Honor"},
            {"matchLabelKeys": ["ver"]},
        )
    ),  # fmt: skip
)


def _labels(app: str, ver: str | None) -> dict[str, str]:
    return {"app": app} if ver is None else {"app": app, "ver": ver}


placed = st.builds(
    lambda i, ns, app, ver, aff, gone: PlacedPod(
        uid=f"p{i}", namespace=ns, labels=_labels(app, ver), affinities=aff, terminating=gone
    ),
    st.integers(0, 10**6),
    st.sampled_from(("default", "other")),
    st.sampled_from(APPS),
    st.sampled_from((None, "1", "2")),
    st.one_of(st.none(), pod_affinities),
    st.integers(0, 5).map(lambda n: n == 0),
)
nodes = st.builds(
    lambda i, zone, pool, tainted, hostname, pods: NodeState(
        name=f"n{i}",
        labels={**({HOSTNAME: f"n{i}"} if hostname else {}), **({ZONE: zone} if zone else {}), "pool": pool},
        taints=(TAINT,) if tainted else (),
        running=tuple(pods),
    ),
    st.integers(0, 7),
    st.sampled_from(("A", "B", "C", None)),
    st.sampled_from(("x", "y")),
    st.booleans(),
    st.booleans().map(lambda missing: not missing),
    st.lists(placed, max_size=3),
)
clusters = st.lists(nodes, min_size=1, max_size=6, unique_by=lambda n: n.name)


@st.composite
def pods(draw: Any) -> PodRequest:
    own: tuple[TopologySpreadConstraint, ...] = tuple(draw(st.lists(constraints, max_size=2)))
    default = draw(st.sampled_from((None, LabelSelector(match_labels={"app": "web"}))))
    return incoming(
        namespace=draw(st.sampled_from(("default", "other"))),
        labels=_labels(draw(st.sampled_from(APPS)), draw(st.sampled_from((None, "1", "2")))),
        affinity=draw(st.one_of(st.none(), pod_affinities)),
        constraints=own,
        default_spread_selector=default,
        node_selector=draw(st.sampled_from(({}, {"pool": "x"}))),
        tolerations=draw(st.sampled_from(((), (Toleration(key="dedicated", operator="Exists"),)))),
    )


def _earlier(node: NodeState, keep: int) -> NodeState:
    """An earlier state of the node: fewer pods, another zone."""
    labels = {**node.labels, ZONE: "old"}
    return msgspec.structs.replace(node, running=node.running[:keep], labels=labels)


NAMESPACES = {"default": {"team": "a"}, "other": {"team": "b"}}


def expected(cluster: list[NodeState], pod: PodRequest) -> dict[str, str | float]:
    snap = snapshot(*cluster, namespaces=NAMESPACES)
    reference = Reference(snap, pod)
    base = PodRules(pod, ())
    out: dict[str, str | float] = {}
    for node in cluster:
        failed = base.failure(node)
        reason = "; ".join(failed) if failed else reference.failure(node)
        if reason:
            out[node.name] = reason
    points = reference.points(lambda n: base.failure(n) is None)
    out.update({name: float(p) for name, p in points.items()})
    return out


@settings(max_examples=300, deadline=None)
@given(clusters, pods(), st.integers(0, 2))
def test_indexed_rules_match_the_straightforward_evaluation(
    cluster: list[NodeState], pod: PodRequest, keep: int
) -> None:
    engine = Engine()
    earlier = snapshot(*(_earlier(n, keep) for n in cluster), namespaces={})
    decide(earlier, pod, engine)  # the index now holds that state; the next decision updates it
    decision = decide(snapshot(*cluster, namespaces=NAMESPACES), pod, engine)
    assert verdicts(decision) == expected(cluster, pod)


def test_a_pod_without_affinity_or_spread_builds_no_topology_rules() -> None:
    engine = Engine()
    index = engine.index_of(snapshot(NodeState(name="n", running=(PlacedPod(uid="p", labels={"app": "web"}),))))
    assert PodRules(incoming(labels={"app": "web"}), (), None, index).topology is None
    with_terms = incoming(affinity=PodAffinities(pod_affinity=None, pod_anti_affinity=None))
    assert PodRules(with_terms, (), None, index).topology is None


def test_the_index_forgets_a_removed_node_and_follows_a_relabelled_one() -> None:
    guard = affinities(anti=(term(labels={"app": "web"}),))
    pods = (PlacedPod(uid="a", labels={"app": "web"}, affinities=guard), PlacedPod(uid="b", labels={"app": "web"}))
    engine = Engine()
    index = engine.new_index()
    index.upsert(NodeState(name="n1", labels={ZONE: "A"}, running=pods))
    index.upsert(NodeState(name="n2", labels={ZONE: "A"}))
    assert dict(index.pods.domains(ZONE)) == {"A": {"n1", "n2"}}
    assert [dict(g.nodes) for g in index.pods.groups(selector_of(LabelSelector(match_labels={"app": "web"})))] == [
        {"n1": 2}
    ]
    assert index.pods.has_pods_with_affinity
    index.upsert(NodeState(name="n2", labels={ZONE: "B"}))
    assert dict(index.pods.domains(ZONE)) == {"A": {"n1"}, "B": {"n2"}}
    index.remove("n1")
    assert dict(index.pods.domains(ZONE)) == {"B": {"n2"}}
    assert list(index.pods.groups(selector_of(LabelSelector()))) == []
    assert not index.pods.has_pods_with_affinity
    assert all(not index.pods.terms(kind) for kind in TermKind)
