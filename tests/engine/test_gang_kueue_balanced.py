"""Kueue's balanced placement (feature gate TASBalancedPlacement): Kueue's own cases from
pkg/cache/scheduler/tas_cache_test.go ("balanced placement; ...") and its integration test, run through
the gang search as Kueue pod groups of 1-CPU pods (Kueue's cases ask for one `example.com/gpu` each: a
node's GPUs are its CPUs here). The leader-worker cases are not ported: a Kueue pod group is one pod set,
it has no leader."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import NodeState, PodRequest, new_index, place_gang
from engine.cluster.network import build_tree
from engine.core.model import GangInput
from engine.decide.gang import GangDecision
from engine.decide.gang.input import gang_request
from engine.node.vendors import registry
from schemas.gangs import (
    KUEUE_BALANCED_PLACEMENT,
    KUEUE_GROUP,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    KUEUE_SLICE_LAYERS,
    KUEUE_SLICE_REQUIRED,
    KUEUE_SLICE_SIZE,
    KUEUE_TOTAL,
)

BLOCK, SUB_BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-subblock", "cloud.com/topology-rack"
HOST = "kubernetes.io/hostname"
THREE = (BLOCK, RACK, HOST)
FOUR = (BLOCK, SUB_BLOCK, RACK, HOST)
ON = {KUEUE_BALANCED_PLACEMENT: True}

Node = tuple[str, tuple[str, ...], int]  # (host, its level values above the host, top first; CPUs)


def decide(
    levels: tuple[str, ...],
    nodes: Sequence[Node],
    notes: dict[str, str],
    count: int,
    gates: dict[str, bool] | None = None,
) -> GangDecision:
    states = []
    for host, values, cpus in nodes:
        labels = {**dict(zip(levels, values, strict=False)), HOST: host}
        name = "-".join((*values, host))
        states.append(NodeState(name=name, labels=labels, allocatable={"cpu": str(cpus), "pods": "110"}))
    index = new_index()
    for state in states:
        index.upsert(state)
    tree = build_tree((), {s.name: s.labels for s in states}, topology_levels=levels).tree
    annotations = {KUEUE_GROUP: "job", KUEUE_TOTAL: str(count), **notes}
    pods = tuple(
        PodRequest(
            uid=f"u{i}",
            name=f"p-{i}",
            requests={"cpu": "1"},
            annotations=annotations,
            labels={"kueue.x-k8s.io/pod-group-pod-index": str(i)},
        )
        for i in range(count)
    )
    gang = GangInput(pods=pods, kueue_feature_gates=ON if gates is None else gates)
    return place_gang(registry, index, tree, gang_request(gang))


def per_host(decision: GangDecision) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in decision.pods:
        if pod.node is not None:
            host = pod.node.rsplit("-", 1)[-1]
            counts[host] = counts.get(host, 0) + 1
    return counts


def preferred(level: str, slice_level: str = "", size: int = 0) -> dict[str, str]:
    notes = {KUEUE_PREFERRED: level}
    if slice_level:
        notes.update({KUEUE_SLICE_REQUIRED: slice_level, KUEUE_SLICE_SIZE: str(size)})
    return notes


FOUR_LEVEL_NODES = [
    ("x1", ("b1", "sb1", "r1"), 18),
    ("x2", ("b1", "sb1", "r2"), 8),
    ("x3", ("b1", "sb2", "r3"), 15),
    ("x4", ("b1", "sb2", "r4"), 9),
    ("x5", ("b1", "sb2", "r4"), 7),
]

CASES: dict[str, tuple[tuple[str, ...], list[Node], dict[str, str], int, dict[str, int]]] = {
    # Kueue's case name: (levels, nodes, the pod set's annotations, pods, Kueue's pods per host)
    "basic": (THREE, [("x1", ("b1", "r1"), 15), ("x2", ("b1", "r2"), 15)], preferred(RACK), 25, {"x1": 13, "x2": 12}),
    "select optmial set of domains": (
        THREE, [("x1", ("b1", "r1"), 15), ("x2", ("b1", "r1"), 13), ("x3", ("b1", "r1"), 10)],
        preferred(RACK), 23, {"x1": 12, "x2": 11},
    ),
    "select optmial set of domains; with slices": (
        THREE, [("x1", ("b1", "r1"), 20), ("x2", ("b1", "r1"), 15), ("x3", ("b1", "r1"), 10)],
        preferred(RACK, HOST, 5), 25, {"x2": 15, "x3": 10},
    ),
    "select correct block": (
        THREE,
        [("x1", ("b1", "r1"), 20), ("x2", ("b1", "r1"), 10), ("x3", ("b2", "r2"), 15), ("x4", ("b2", "r2"), 15)],
        preferred(RACK), 22, {"x3": 11, "x4": 11},
    ),
    "cannot chose domains from different blocks": (
        THREE,
        [("x1", ("b1", "r1"), 14), ("x2", ("b1", "r1"), 11), ("x3", ("b2", "r2"), 15), ("x4", ("b2", "r2"), 10)],
        preferred(RACK), 25, {"x1": 14, "x2": 11},
    ),
    "select correct block; prefer blocks with single rack; with slices": (
        THREE,
        [("x1", ("b1", "r1"), 15), ("x2", ("b1", "r2"), 15), ("x3", ("b1", "r3"), 15), ("x4", ("b1", "r3"), 15)],
        preferred(RACK, HOST, 5), 25, {"x3": 15, "x4": 10},
    ),
    "four level topology; slice two levels below balanced level": (
        FOUR, FOUR_LEVEL_NODES, preferred(SUB_BLOCK, HOST, 2), 20, {"x3": 10, "x4": 8, "x5": 2},
    ),
    "four level topology; slice one level below balanced level": (
        FOUR, FOUR_LEVEL_NODES, preferred(SUB_BLOCK, RACK, 2), 20, {"x3": 10, "x4": 3, "x5": 7},
    ),
    "four level topology; balance on rack level; slice not on the lowest level": (
        (BLOCK, SUB_BLOCK, RACK),
        [("x1", ("b1", "sb1", "r1"), 18), ("x2", ("b1", "sb1", "r2"), 8),
         ("x3", ("b1", "sb2", "r3"), 15), ("x4", ("b1", "sb2", "r4"), 15)],
        preferred(SUB_BLOCK, RACK, 2), 20, {"x3": 10, "x4": 10},  # Kueue's answer by rack: r3 10, r4 10
    ),
    "three level topology; balance on the same level as slice": (
        THREE,
        [("x1", ("b1", "r1"), 15), ("x2", ("b1", "r1"), 13), ("x3", ("b1", "r1"), 10),
         ("x4", ("b1", "r2"), 20), ("x5", ("b1", "r2"), 8)],
        preferred(HOST, HOST, 2), 22, {"x2": 12, "x3": 10},
    ),
    "three level topology; balance on the lowest level": (
        THREE,
        [("x1", ("b1", "r1"), 20), ("x2", ("b1", "r1"), 8), ("x3", ("b1", "r2"), 15),
         ("x4", ("b1", "r2"), 13), ("x5", ("b1", "r2"), 10)],
        preferred(HOST), 22, {"x3": 11, "x4": 11},
    ),
    "prioritize (using entropy) balanced domains; second rack wins": (
        THREE,
        [("x1", ("b1", "r1"), 10), ("x2", ("b1", "r1"), 5), ("x3", ("b1", "r2"), 5),
         ("x4", ("b1", "r2"), 5), ("x5", ("b1", "r2"), 5)],
        preferred(RACK), 15, {"x3": 5, "x4": 5, "x5": 5},
    ),
    "prioritize (using entropy) balanced domains; first rack wins": (
        THREE,
        [("x1", ("b1", "r1"), 8), ("x2", ("b1", "r1"), 8), ("x3", ("b1", "r1"), 8),
         ("x4", ("b1", "r2"), 16), ("x5", ("b1", "r2"), 8)],
        preferred(RACK), 24, {"x1": 8, "x2": 8, "x3": 8},
    ),
    "two level topology; balance on the highest level": (
        (RACK, HOST),
        [("x1", ("r1",), 21), ("x2", ("r1",), 9), ("x3", ("r2",), 11), ("x4", ("r2",), 10), ("x5", ("r2",), 10)],
        preferred(RACK), 23, {"x1": 12, "x3": 11},
    ),
    "select correct block taking into account pruning": (
        THREE,
        [("x1", ("b1", "r1"), 5), ("x2", ("b1", "r1"), 5), ("x3", ("b1", "r2"), 5), ("x4", ("b1", "r2"), 5),
         ("x5", ("b2", "r3"), 10), ("x6", ("b2", "r3"), 4), ("x7", ("b2", "r3"), 4), ("x8", ("b2", "r3"), 4),
         ("x9", ("b2", "r4"), 5), ("x10", ("b2", "r5"), 5)],
        preferred(RACK), 20, {"x1": 5, "x2": 5, "x3": 5, "x4": 5},
    ),
    # test/integration/singlecluster/tas/tas_test.go, "place the workers evenly on selected nodes"
    "integration: place the workers evenly on selected nodes": (
        THREE,
        [("x1", ("b1", "r1"), 12), ("x2", ("b1", "r1"), 12), ("x3", ("b1", "r2"), 14), ("x4", ("b1", "r2"), 6)],
        preferred(RACK, HOST, 4), 16, {"x1": 8, "x2": 8},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_kueue_balanced_placement_cases(case: str) -> None:
    levels, nodes, notes, count, kueue = CASES[case]
    decision = decide(levels, nodes, notes, count)
    assert decision.placed and not decision.partial
    assert per_host(decision) == kueue


def test_without_the_feature_gate_the_fullest_domains_are_filled_first() -> None:
    # Kueue's "basic" case with TASBalancedPlacement off (its default): best fit, x1 full, then x2
    levels, nodes, notes, count, _ = CASES["basic"]
    assert per_host(decide(levels, nodes, notes, count, gates={})) == {"x1": 15, "x2": 10}
    off = {KUEUE_BALANCED_PLACEMENT: False}
    assert per_host(decide(levels, nodes, notes, count, gates=off)) == {"x1": 15, "x2": 10}


def test_a_required_level_is_never_balanced() -> None:
    # Kueue balances preferred levels only: a required block is packed as without the gate
    nodes = [("x1", ("b1", "r1"), 15), ("x2", ("b1", "r2"), 15)]
    decision = decide(THREE, nodes, {KUEUE_REQUIRED: BLOCK}, 25)
    assert decision.placed and per_host(decision) == {"x1": 15, "x2": 10}


def test_ranks_follow_the_balanced_layout_and_slices_stay_whole() -> None:
    levels, nodes, notes, count, _ = CASES["four level topology; slice two levels below balanced level"]
    decision = decide(levels, nodes, notes, count)
    hosts = [p.node.rsplit("-", 1)[-1] for p in decision.pods if p.node is not None]
    assert [p.rank for p in decision.pods] == list(range(20))
    assert hosts == ["x3"] * 10 + ["x4"] * 8 + ["x5"] * 2  # consecutive ranks share a host
    by_slice: dict[str, set[str]] = {}
    for pod in decision.pods:
        by_slice.setdefault(pod.sub_group, set()).add(pod.node or "")
    assert len(by_slice) == 10 and all(len(nodes) == 1 for nodes in by_slice.values())


def test_multi_layer_slices_are_balanced_in_whole_inner_slices() -> None:
    # Not one of Kueue's cases (it has none with layers), worked by its steps: racks of 4 pods in hosts of 2.
    # The racks are counted in whole host slices (r1: 6 + 6, r3: 8 + 2); sb2 holds the 4 rack slices alone
    # and its racks r3 and r4 take 2 each; inside r3 Kueue's descent takes x5 first (its children sorted
    # before their host slices are counted), 1 host slice, then x4 the other 3. One layer of rack slices
    # alone gives x5 its 3 pods.
    nodes = [
        ("x1", ("b1", "sb1", "r1"), 7), ("x2", ("b1", "sb1", "r1"), 7), ("x3", ("b1", "sb1", "r2"), 4),
        ("x4", ("b1", "sb2", "r3"), 9), ("x5", ("b1", "sb2", "r3"), 3), ("x6", ("b1", "sb2", "r4"), 8),
    ]  # fmt: skip
    layers = json.dumps([{"topology": RACK, "size": 4}, {"topology": HOST, "size": 2}])
    decision = decide(FOUR, nodes, {KUEUE_PREFERRED: SUB_BLOCK, KUEUE_SLICE_LAYERS: layers}, 16)
    assert decision.placed and per_host(decision) == {"x4": 6, "x5": 2, "x6": 8}
    hosts: dict[str, set[str]] = {}
    for pod in decision.pods:
        hosts.setdefault(pod.sub_group, set()).add(pod.node or "")
    assert len(hosts) == 8 and all(len(found) == 1 for found in hosts.values())  # each host slice on one host
    single = decide(FOUR, nodes, preferred(SUB_BLOCK, RACK, 4), 16)
    assert per_host(single) == {"x4": 5, "x5": 3, "x6": 8}


def test_no_balanced_layout_falls_back_to_the_best_fit() -> None:
    # no block holds the 7 pods, so no group of racks does: Kueue's balanced step finds nothing and its
    # best fit (the gang's own walk) spreads the preferred racks across the blocks
    nodes = [("x1", ("b1", "r1"), 4), ("x2", ("b2", "r2"), 4)]
    decision = decide(THREE, nodes, preferred(RACK), 7)
    assert decision.placed and per_host(decision) == {"x1": 4, "x2": 3}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 9)), min_size=1, max_size=7),
    st.integers(1, 24),
    st.sampled_from([(RACK, "", 0), (BLOCK, "", 0), (HOST, "", 0), (RACK, HOST, 2), (BLOCK, RACK, 3), (BLOCK, "", 4)]),
)
def test_balanced_placement_keeps_every_rule(
    shape: list[tuple[int, int, int]], count: int, request: tuple[str, str, int]
) -> None:
    level, slice_level, size = request
    nodes = [(f"x{i}", (f"b{b}", f"r{r}"), cpus) for i, (b, r, cpus) in enumerate(shape)]
    notes = preferred(level, slice_level, size)
    if size and not slice_level:  # multi-layer: racks of `size` pods in hosts of 2, each host slice checked
        layers = [{"topology": RACK, "size": size}, {"topology": HOST, "size": 2}]
        notes, slice_level = {**notes, KUEUE_SLICE_LAYERS: json.dumps(layers)}, HOST
    decision = decide(THREE, nodes, notes, count)
    unbalanced = decide(THREE, nodes, notes, count, gates={})
    assert decision.placed == unbalanced.placed  # balancing changes where, never whether
    assert decide(THREE, nodes, notes, count) == decision  # same input, same answer
    if not decision.placed:
        return
    found = per_host(decision)
    assert sum(found.values()) == count
    cpus = {host: n for host, _, n in nodes}
    assert all(found[host] <= cpus[host] for host in found)
    if slice_level:  # every slice inside one domain of its level
        depth = THREE.index(slice_level)
        where = {f"x{i}": (f"b{b}", f"r{r}", f"x{i}")[: depth + 1] for i, (b, r, _) in enumerate(shape)}
        by_slice: dict[str, set[tuple[str, ...]]] = {}
        for pod in decision.pods:
            assert pod.node is not None
            by_slice.setdefault(pod.sub_group, set()).add(where[pod.node.rsplit("-", 1)[-1]])
        assert all(len(domains) == 1 for domains in by_slice.values())
