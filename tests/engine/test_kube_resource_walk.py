"""A pod no device vendor claims is decided by the index's resource classes, best NodeResourcesFit +
BalancedAllocation points first, with the answer of scoring every feasible node (the explained
decision asks and scores them all): on random small clusters of varied amounts, zones and regions,
with and without topology scores, and once the engine's rankings were made on an earlier state of
the cluster and brought up to date from the index's log of resource classes."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from pod_topology_builders import HOSTNAME, ZONE, affinities, incoming, running, snapshot, spread, term
from test_kube_pod_topology import APPS, NAMESPACES, clusters, pods

from engine import Engine, Mode, NodeState, PodRequest
from engine.core.model import NodeImage
from engine.decide.kube.node_scores import NodeScores
from schemas.kube import LabelSelector, Taint

SHAPES = (
    {"cpu": "8", "memory": "32Gi", "pods": "110"},
    {"cpu": "16", "memory": "32Gi", "pods": "110"},
    {"cpu": "4", "memory": "64Gi", "pods": "110"},
    {"cpu": "4", "memory": "16Gi", "pods": "0"},
    None,
)
REQUESTED = ({}, {"cpu": "1", "memory": "2Gi"}, {"cpu": "3", "memory": "1Gi"}, {"cpu": "7", "memory": "30Gi"})
REGION = "topology.kubernetes.io/region"
SOFT = Taint(key="spot", value="yes", effect="PreferNoSchedule")  # TaintToleration then normalises
IMAGE = NodeImage(names=("registry.example/app:1",), size_bytes=500 * 1024 * 1024)


def with_resources(node: NodeState, draw: Any, *, labelled: bool) -> NodeState:
    """The node with drawn amounts, a zone and region (`labelled`: a hostname, a zone and a region, the
    shape whose topology scores come from domains), and maybe the pod's image."""
    labels = {**node.labels, HOSTNAME: node.name} if labelled else dict(node.labels)
    zone = draw(st.sampled_from(("A", "B", "C") if labelled else ("A", "B", "C", None, "keep")))
    if zone is None:
        labels.pop(ZONE, None)
    elif zone != "keep":
        labels[ZONE] = zone
    region = draw(st.sampled_from(("r1", "r2") if labelled else ("r1", "r2", None)))
    if region is not None:
        labels[REGION] = region
    return msgspec.structs.replace(
        node,
        labels=labels,
        allocatable=draw(st.sampled_from(SHAPES)),
        requested=draw(st.sampled_from(REQUESTED)),
        images=(IMAGE,) if draw(st.integers(0, 4)) == 0 else (),
        taints=(*node.taints, SOFT) if draw(st.integers(0, 5)) == 0 else node.taints,
        ready=draw(st.integers(0, 9)) > 0,
        unschedulable=draw(st.integers(0, 9)) == 0,
    )


@st.composite
def resource_clusters(draw: Any) -> list[NodeState]:
    labelled = draw(st.booleans())
    return [with_resources(n, draw, labelled=labelled) for n in draw(clusters)]


@st.composite
def scored_pods(draw: Any) -> PodRequest:
    """A pod the topology scores read (soft spread, preferred terms), whose filters rarely refuse."""
    app = draw(st.sampled_from(APPS))
    keys = st.sampled_from((HOSTNAME, ZONE, REGION))
    soft = st.builds(
        lambda key, skew, a: spread(key, skew, hard=False, labels={"app": a}),
        keys,
        st.integers(1, 3),
        st.sampled_from(APPS),
    )
    preferred = st.lists(
        st.tuples(
            st.integers(1, 100), st.builds(lambda key, a: term(key, labels={"app": a}), keys, st.sampled_from(APPS))
        ),
        max_size=2,
    )
    return incoming(
        labels={"app": app},
        constraints=tuple(draw(st.lists(soft, max_size=2))),
        affinity=affinities(preferred=tuple(draw(preferred)), preferred_anti=tuple(draw(preferred))),
        default_spread_selector=draw(st.sampled_from((None, LabelSelector(match_labels={"app": app})))),
    )


@st.composite
def cpu_pods(draw: Any) -> PodRequest:
    """A pod of `pods()` (affinity, spread, defaults), of `scored_pods()` or a plain one, asking cpu and
    memory, sometimes with an image."""
    pod = draw(st.one_of(pods(), scored_pods(), st.just(incoming(labels={"app": "web"}))))
    requests = draw(st.sampled_from(({}, {"cpu": "1"}, {"cpu": "2", "memory": "4Gi"}, {"memory": "16Gi"})))
    images = draw(st.sampled_from(((), (IMAGE.names[0],))))
    return msgspec.structs.replace(pod, requests=requests, images=images)


def answer(engine: Engine, nodes: list[NodeState], pod: PodRequest, *, explain: bool) -> tuple[str | None, float]:
    decision = engine.place(snapshot(*nodes, namespaces=NAMESPACES), pod, Mode.DEFAULT, explain=explain)
    return decision.node, decision.score if decision.node is not None else 0.0


@settings(max_examples=400, deadline=None)
@given(resource_clusters(), cpu_pods())
def test_the_walk_by_resource_class_gives_the_answer_of_every_feasible_node_scored(
    nodes: list[NodeState], pod: PodRequest
) -> None:
    assert answer(Engine(), nodes, pod, explain=False) == answer(Engine(), nodes, pod, explain=True)


@settings(max_examples=200, deadline=None)
@given(resource_clusters(), resource_clusters(), cpu_pods(), st.data())
def test_rankings_kept_across_changes_give_the_answer_of_every_feasible_node_scored(
    earlier: list[NodeState], later: list[NodeState], pod: PodRequest, data: st.DataObject
) -> None:
    """The earlier cluster's rankings, followed through changed amounts, labels, PreferNoSchedule taints
    and nodes come and gone."""
    engine = Engine()
    answer(engine, earlier, pod, explain=False)
    other = data.draw(cpu_pods())
    answer(engine, later, other, explain=False)  # another shape ranked meanwhile
    assert answer(engine, later, pod, explain=False) == answer(Engine(), later, pod, explain=True)


def test_a_cpu_pod_asks_only_the_best_resource_class_nodes(monkeypatch: Any) -> None:
    """Of 60 nodes in three zones, the pod spread over zones goes to the emptiest zone's least loaded
    node; the walk asks the points of a few nodes, not of all 60."""
    asked: list[str] = []
    original = NodeScores.points

    def spy(scores: NodeScores, facts: Any) -> float:
        asked.append(facts.name)
        return original(scores, facts)

    nodes = [
        NodeState(
            name=f"n{i:02d}",
            labels={HOSTNAME: f"n{i:02d}", ZONE: "ABC"[i % 3]},
            allocatable={"cpu": "16", "memory": "64Gi", "pods": "110"},
            requested={"cpu": str(1 + i % 5), "memory": f"{1 + i % 7}Gi"},
        )
        for i in range(60)
    ]
    web = {"app": "web"}
    pod = incoming(
        labels=web,
        requests={"cpu": "1", "memory": "1Gi"},
        constraints=(spread(ZONE, hard=False, labels=web), spread(HOSTNAME, hard=False, labels=web)),
    )
    monkeypatch.setattr(NodeScores, "points", spy)
    fast = answer(Engine(), nodes, pod, explain=False)
    walked = len(asked)
    assert fast == answer(Engine(), nodes, pod, explain=True)
    assert walked <= 10


def test_a_busier_node_in_an_emptier_zone_beats_an_idle_one_where_the_pods_are() -> None:
    """The idle node's class has the most resource points, but its zone holds the pod's replicas: the
    walk must not pass over the busier class of the other zone."""
    web = {"app": "web"}
    shape = {"cpu": "16", "memory": "64Gi", "pods": "110"}

    def node(name: str, zone: str, cpu: str, *pods: str) -> NodeState:
        return NodeState(
            name=name,
            labels={HOSTNAME: name, ZONE: zone},
            allocatable=shape,
            requested={"cpu": cpu, "memory": "8Gi"},
            running=tuple(running(uid, app="web") for uid in pods),
        )

    nodes = [node("a-idle", "A", "1"), node("a-full", "A", "12", "w1", "w2"), node("b-busy", "B", "8")]
    pod = incoming(labels=web, requests={"cpu": "1"}, constraints=(spread(ZONE, hard=False, labels=web),))
    assert answer(Engine(), nodes, pod, explain=True)[0] == "b-busy"
    assert answer(Engine(), nodes, pod, explain=False) == answer(Engine(), nodes, pod, explain=True)


def test_the_index_counts_nodes_with_a_prefer_no_schedule_taint_through_changes() -> None:
    engine = Engine()
    index = engine.new_index()
    plain, soft = NodeState(name="a"), NodeState(name="b", taints=(SOFT,))
    index.upsert(plain)
    index.upsert(soft)
    assert index.soft_tainted == 1
    index.upsert(msgspec.structs.replace(soft, taints=(SOFT, SOFT)))  # still one node
    index.upsert(msgspec.structs.replace(plain, taints=(SOFT,)))
    assert index.soft_tainted == 2
    index.upsert(plain)
    index.remove("b")
    index.remove("b")
    assert index.soft_tainted == 0


def test_a_node_holding_the_pods_image_beats_its_class_mates_before_it_by_name() -> None:
    """Equal amounts and zone, one class: ImageLocality's points differ within it, so the walk does not
    stop at the class's first node."""
    nodes = [
        NodeState(
            name=name,
            labels={HOSTNAME: name, ZONE: "A"},
            allocatable={"cpu": "16", "memory": "64Gi", "pods": "110"},
            images=images,
        )
        for name, images in (("a", ()), ("b", ()), ("c", (IMAGE,)))
    ]
    pod = incoming(labels={"app": "web"}, requests={"cpu": "1"}, images=IMAGE.names)
    assert answer(Engine(), nodes, pod, explain=False)[0] == "c"
    assert answer(Engine(), nodes, pod, explain=False) == answer(Engine(), nodes, pod, explain=True)
