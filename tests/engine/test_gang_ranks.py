"""Rank order: members are laid out by their pod index (Indexed Job, StatefulSet, LeaderWorkerSet,
Kueue pod groups), else by natural name order, so consecutive ranks share a node, then a leaf, then a
spine; the decision reports each member's rank and domain."""

from __future__ import annotations

import random

import msgspec
import pytest
from engine_builders import fixture_node
from gang_cases import H100, cluster, decide_gang, hard, pod
from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import hn, node, sub, volcano_example

from engine import NodeState, PodRequest
from engine.decide.gang.ranks import natural_key, rank_of


def test_w_2_comes_before_w_10() -> None:
    # Twelve 2-GPU members, four per node: w-0..w-3 share node0, w-4..w-7 node1, w-8..w-11 node2.
    pods = [pod(f"w-{i}", 2) for i in range(12)]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(2))
    assert [p.name for p in decision.pods] == [f"w-{i}" for i in range(12)]
    nodes = [p.node for p in decision.pods]
    assert nodes == ["node0"] * 4 + ["node1"] * 4 + ["node2"] * 4
    assert sorted(["w-10", "w-2", "w-1"], key=natural_key) == ["w-1", "w-2", "w-10"]


@pytest.mark.parametrize(
    ("key", "where"),
    [
        ("batch.kubernetes.io/job-completion-index", "labels"),
        ("batch.kubernetes.io/job-completion-index", "annotations"),
        ("apps.kubernetes.io/pod-index", "labels"),
        ("leaderworkerset.sigs.k8s.io/worker-index", "labels"),
        ("kueue.x-k8s.io/pod-group-pod-index", "labels"),
    ],
)
def test_each_pod_index_label_gives_the_rank(key: str, where: str) -> None:
    # Names in the opposite order of the indexes: the index decides.
    pods = [msgspec.structs.replace(pod(f"p-{9 - i}", 2), **{where: {key: str(i)}}) for i in range(8)]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(2))
    assert [p.rank for p in decision.pods] == list(range(8))
    assert [p.node for p in decision.pods] == ["node0"] * 4 + ["node1"] * 4


def test_kueue_names_the_index_label_of_a_pod_group() -> None:
    named = "example.com/rank"
    member = PodRequest(
        uid="u", name="x", labels={named: "7"}, annotations={"kueue.x-k8s.io/pod-group-pod-index-label": named}
    )
    assert rank_of(member) == 7
    assert rank_of(PodRequest(uid="v", name="y", labels={"apps.kubernetes.io/pod-index": "-1"})) is None


def test_the_decision_reports_rank_and_domain() -> None:
    pods = [pod(f"w-{i}", labels={"batch.kubernetes.io/job-completion-index": str(i)}) for i in range(3)]
    decision = decide_gang(cluster(), volcano_example(), pods, hard(2))
    assert [(p.rank, p.node, p.domain) for p in decision.pods] == [
        (0, "node0", "s0"),
        (1, "node1", "s0"),
        (2, "node2", "s1"),
    ]


# --- property: ranks are contiguous in every domain --------------------------------------------


@st.composite
def ranked(draw: st.DrawFn) -> tuple[list[NodeState], list[object], list[PodRequest]]:
    tors = draw(st.integers(1, 4))
    per_tor = draw(st.integers(1, 3))
    names = [f"n{t}-{i}" for t in range(tors) for i in range(per_tor)]
    rng = random.Random(draw(st.integers(0, 10_000)))
    nodes = [fixture_node(n, H100, busy=sorted(rng.sample(range(8), rng.choice((0, 0, 2, 4, 8))))) for n in names]
    hypernodes: list[object] = [hn(f"tor{t}", 1, *(node(f"n{t}-{i}") for i in range(per_tor))) for t in range(tors)]
    hypernodes.append(hn("spine", 2, *(sub(f"tor{t}") for t in range(tors))))
    gpus = draw(st.sampled_from((1, 2, 4)))
    count = draw(st.integers(1, 16))
    ranks = draw(st.permutations(list(range(count))))
    pods = [pod(f"p{r * 7 % 11}-{r}", gpus, labels={"apps.kubernetes.io/pod-index": str(r)}) for r in ranks]
    return nodes, hypernodes, pods


@settings(max_examples=80, deadline=None)
@given(ranked())
def test_ranks_are_contiguous_in_every_node_and_leaf(
    case: tuple[list[NodeState], list[object], list[PodRequest]],
) -> None:
    nodes, hypernodes, pods = case
    decision = decide_gang(nodes, hypernodes, pods)
    if not decision.placed:
        return
    by_domain: dict[str, list[int]] = {}
    for placed in decision.pods:
        assert placed.node is not None and placed.rank is not None
        by_domain.setdefault(placed.node, []).append(placed.rank)
        by_domain.setdefault(placed.node.split("-")[0], []).append(placed.rank)  # its ToR
    for ranks in by_domain.values():
        assert sorted(ranks) == list(range(min(ranks), max(ranks) + 1))
