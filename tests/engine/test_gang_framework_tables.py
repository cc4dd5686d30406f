"""Cases from Volcano's allocate tests (subJobs of a subGroupPolicy being rescheduled) and Kueue's TAS
slices (each slice of consecutive pod indexes within its level), run through the engine's gang search."""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import fixture_node
from gang_cases import H100
from network_builders import hn, node, sub

from engine import NodeState, PodRequest, new_index, place_gang
from engine.cluster.network import build_tree
from engine.core.model import GangInput
from engine.decide.gang import GangRequest
from engine.decide.gang.input import gang_request
from engine.node.vendors import registry
from schemas.events import NetworkConstraint, SubGroupPolicy, TopologyMode
from schemas.gangs import KUEUE_GROUP, KUEUE_REQUIRED, KUEUE_SLICE_REQUIRED, KUEUE_SLICE_SIZE, KUEUE_TOTAL

TASK_SPEC = "volcano.sh/task-spec"


def cpu_node(name: str, used_cpu: int) -> NodeState:
    requested = {"cpu": str(used_cpu), "memory": f"{2 * used_cpu}G"} if used_cpu else {}
    return NodeState(
        name=name,
        allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"},
        requested=requested,
        pods=used_cpu // 2,
    )


def task(name: str, node_name: str = "") -> PodRequest:
    return PodRequest(
        uid=f"uid-{name}",
        name=name,
        namespace="c1",
        requests={"cpu": "2", "memory": "4G"},
        labels={TASK_SPEC: "worker"},
        node_name=node_name,
    )


# Volcano's rescheduling cases: PodGroup pg1, gang hard tier 2, subGroupPolicy task1 by volcano.sh/task-spec,
# hard tier 1; s0 = {s0-n1, s0-n2}, s1 = {s1-n3, s1-n4}, s2 over both; 4-CPU nodes, 2-CPU tasks. Running
# tasks hold 2 CPU of their node. (name, CPU used per node, running tasks, pending tasks, expected nodes)
RESCHEDULING = [
    ("two pending join their running subJob in s0", {"s0-n1": 2, "s0-n2": 2},
     {"p1": "s0-n1", "p2": "s0-n2"}, ["p3", "p4"], {"p3": "s0-n1", "p4": "s0-n2"}),
    ("one pending joins its running subJob in s0", {"s0-n1": 2, "s0-n2": 2},
     {"p1": "s0-n1", "p2": "s0-n2"}, ["p3"], {"p3": "s0-n1"}),
    ("a full s0 holds the subJob back: never into s1 above its tier", {"s0-n1": 4, "s0-n2": 4},
     {"p1": "s0-n1", "p2": "s0-n2"}, ["p3"], {"p3": None}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "used", "running", "pending", "expected"), RESCHEDULING, ids=[r[0] for r in RESCHEDULING]
)
def test_volcano_rescheduling_subjobs(
    case: str, used: dict[str, int], running: dict[str, str], pending: list[str], expected: dict[str, str | None]
) -> None:
    names = ["s0-n1", "s0-n2", "s1-n3", "s1-n4"]
    index = new_index()
    for name in names:
        index.upsert(cpu_node(name, used.get(name, 0)))
    hypernodes = [
        hn("s0", 1, node("s0-n1"), node("s0-n2")),
        hn("s1", 1, node("s1-n3"), node("s1-n4")),
        hn("s2", 2, sub("s0"), sub("s1")),
    ]
    tree = build_tree(hypernodes, {n: {} for n in names}).tree
    hard = NetworkConstraint(mode=TopologyMode.HARD, highest_tier=1)
    policy = SubGroupPolicy(
        name="task1", match_label_keys=(TASK_SPEC,), network=hard, sub_group_size=len(running) + len(pending)
    )
    pods = [task(n, at) for n, at in running.items()] + [task(n) for n in pending]
    gang = GangRequest(
        name="c1/pg1",
        min_member=len(pods),
        network=NetworkConstraint(mode=TopologyMode.HARD, highest_tier=2),
        sub_groups=(policy,),
        pods=tuple(pods),
    )
    decision = place_gang(registry, index, tree, gang)
    assert {p.name: p.node for p in decision.pods if not p.running} == expected
    assert decision.placed == all(expected.values())


def test_kueue_slices_take_consecutive_pod_indexes_each_within_its_rack() -> None:
    # Kueue's pod index label decides the slices: indexes 0-1 share a rack and 2-3 share one, whatever
    # the pod names say (here the names run against the indexes).
    levels = ("cloud/block", "cloud/rack", "kubernetes.io/hostname")

    def labelled(name: str, rack: str) -> NodeState:
        base = fixture_node(name, H100)
        return msgspec.structs.replace(base, labels={levels[0]: "b1", levels[1]: rack, levels[2]: name})

    nodes = [labelled(f"n{i}", f"r{i // 2}") for i in range(6)]
    annotations = {KUEUE_GROUP: "bert", KUEUE_TOTAL: "4", KUEUE_REQUIRED: levels[0],
                   KUEUE_SLICE_REQUIRED: levels[1], KUEUE_SLICE_SIZE: "2"}  # fmt: skip
    order = [0, 2, 1, 3]  # bert-a has index 0, bert-b index 2, ...
    pods = tuple(
        PodRequest(
            uid=f"u{i}",
            name=f"bert-{'abcd'[i]}",
            namespace="ml",
            requests={"nvidia.com/gpu": "8"},
            annotations=annotations,
            labels={"kueue.x-k8s.io/pod-group-pod-index": str(order[i])},
        )
        for i in range(4)
    )
    index = new_index()
    for n in nodes:
        index.upsert(n)
    tree = build_tree([], {n.name: n.labels for n in nodes}, topology_levels=levels).tree
    decision = place_gang(registry, index, tree, gang_request(GangInput(pods=pods)))
    assert decision.placed
    rack = {n.name: n.labels[levels[1]] for n in nodes}
    index_of = {p.uid: int(p.labels["kueue.x-k8s.io/pod-group-pod-index"]) for p in pods}
    by_rank = {index_of[p.uid]: rack[p.node or ""] for p in decision.pods}
    assert by_rank[0] == by_rank[1] and by_rank[2] == by_rank[3]
    assert [p.sub_group for p in decision.pods] == ["slice/slice-0"] * 2 + ["slice/slice-1"] * 2
