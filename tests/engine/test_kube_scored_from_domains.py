"""A pod InterPodAffinity or PodTopologySpread scores is decided from the feasible nodes' domains (no
node asked but those the walk compares), with the answer of the straightforward evaluation
(pod_topology_reference.py) on random small clusters, also once the engine's cached feasible sets were
made on an earlier state of the cluster and brought up to date from the index's node log."""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import gpu
from hypothesis import given, settings
from hypothesis import strategies as st
from pod_topology_builders import HOSTNAME, ZONE, incoming, running, snapshot, spread
from test_kube_pod_topology import NAMESPACES, _earlier, clusters, expected, pods

from engine import Allocation, Engine, Mode, NodeState, PodRequest
from engine.decide.node_rules import PodRules


def best_of(verdicts: dict[str, str | float]) -> tuple[str | None, float]:
    """The straightforward winner: the most points, ties to the first name."""
    scored = [(-float(v), name) for name, v in verdicts.items() if not isinstance(v, str)]
    if not scored:
        return None, 0.0
    points, name = min(scored)
    return name, -points


def labelled(node: NodeState, zone: str) -> NodeState:
    """The node with a hostname and a zone: the shape the domains' normalisation covers."""
    return msgspec.structs.replace(node, labels={**node.labels, HOSTNAME: node.name, ZONE: zone})


def check(cluster: list[NodeState], pod: PodRequest, keep: int) -> None:
    engine = Engine()
    earlier = snapshot(*(_earlier(n, keep) for n in cluster), namespaces={})
    engine.place(earlier, pod, Mode.DEFAULT)  # the cached feasible sets now hold that state
    decision = engine.place(snapshot(*cluster, namespaces=NAMESPACES), pod, Mode.DEFAULT)
    node, points = best_of(expected(cluster, pod))
    assert decision.node == node
    if node is not None:
        assert decision.score == points


@settings(max_examples=300, deadline=None)
@given(clusters, pods(), st.integers(0, 2))
def test_decisions_from_domains_match_the_straightforward_evaluation(
    cluster: list[NodeState], pod: PodRequest, keep: int
) -> None:
    check(cluster, pod, keep)


@settings(max_examples=300, deadline=None)
@given(clusters, pods(), st.integers(0, 2), st.lists(st.sampled_from("ABC"), min_size=6, max_size=6))
def test_on_fully_labelled_nodes_too(cluster: list[NodeState], pod: PodRequest, keep: int, zones: list[str]) -> None:
    check([labelled(n, z) for n, z in zip(cluster, zones, strict=False)], pod, keep)


def test_a_spread_pod_on_labelled_nodes_is_decided_without_asking_every_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prepared: list[bool] = []
    original = PodRules.prepare_from

    def spy(rules: PodRules, base: object) -> bool:
        prepared.append(original(rules, base))  # type: ignore[arg-type]
        return prepared[-1]

    monkeypatch.setattr(PodRules, "prepare_from", spy)
    web = {"app": "web"}
    nodes = [
        labelled(NodeState(name="a", running=(running("w1", **web), running("w2", **web))), "A"),
        labelled(NodeState(name="b", running=(running("w3", **web),)), "A"),
        labelled(NodeState(name="c"), "B"),
        labelled(NodeState(name="d"), "B"),
    ]
    constraints = (spread(ZONE, hard=False, labels=web), spread(HOSTNAME, hard=False, labels=web))
    pod = incoming(labels=web, constraints=constraints)
    decision = Engine().place(snapshot(*nodes), pod, Mode.DEFAULT)
    assert prepared == [True]
    assert decision.node == "c"
    assert decision.score == 200.0


@settings(max_examples=150, deadline=None)
@given(
    clusters,
    pods(),
    st.lists(st.sampled_from("ABC"), min_size=6, max_size=6),
    st.lists(st.integers(0, 3), min_size=6, max_size=6),
)
def test_a_gpu_pods_decision_from_domains_is_the_one_every_node_asked_gives(
    cluster: list[NodeState], pod: PodRequest, zones: list[str], held: list[int]
) -> None:
    """The device score leads and the plugins' points break its ties: the same winner and score as the
    decision that asks (and explains) every node."""
    nodes = [
        msgspec.structs.replace(
            labelled(n, z),
            devices=tuple(gpu(i) for i in range(4)),
            allocations=tuple(Allocation(pod_uid=f"held-{i}", index=i) for i in range(h)),
        )
        for n, z, h in zip(cluster, zones, held, strict=False)
    ]
    gpu_pod = msgspec.structs.replace(pod, requests={"nvidia.com/gpu": "1"})
    snap = snapshot(*nodes, namespaces=NAMESPACES)
    fast = Engine().place(snap, gpu_pod, Mode.DEFAULT)
    every = Engine().place(snap, gpu_pod, Mode.DEFAULT, explain=True)
    assert (fast.node, fast.score) == (every.node, every.score)
