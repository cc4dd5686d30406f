"""Gangs of Kubernetes' Workload API, KAI and Kueue's extra annotations placed by the one gang search: the KAI
topology docs' example, nested subgroups, segments, snapshot files, and properties (a hard level is never
exceeded, never below a minimum; same input, same answer)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from gang_api_builders import (
    LEVELS,
    RACK,
    ZONE,
    decide,
    hard,
    kai_group,
    kube_group,
    labelled,
    layers,
    level_of,
    member,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import NodeState
from engine.core.model import GangInput
from schemas.errors import FieldError
from schemas.gangs import (
    KUEUE_GROUP,
    KUEUE_SLICE_LAYERS,
    KUEUE_TOTAL,
)
from schemas.gangs_kai import KAI_SUBGROUP_LABEL, kai_policy
from topoplace.cli import main


def kai_docs_cluster() -> list[NodeState]:
    """KAI's topology docs: zone A racks of 2, 1, 1, 1 GPUs; zone B three racks of 2; one GPU a node."""
    racks = {"a1": 2, "a2": 1, "a3": 1, "a4": 1, "b1": 2, "b2": 2, "b3": 2}
    return [
        labelled(f"node-{rack}-{i}", f"zone-{rack[0]}", rack, free=1)
        for rack, count in racks.items()
        for i in range(count)
    ]


def test_kai_docs_example_zone_a_by_binpacking_and_rack_a1_filled_first() -> None:
    # 3 one-GPU tasks, zone required, rack preferred: no rack holds 3; zone A (5 GPUs) is tighter than
    # zone B (6); inside it rack A1 (2 GPUs) is filled first, so the pods use 2 racks, not 3.
    group = kai_group(
        {"minMember": 3, "topologyConstraint": {"requiredTopologyLevel": ZONE, "preferredTopologyLevel": RACK}}
    )
    decision = decide(kai_docs_cluster(), GangInput(kai_podgroup=group, pods=tuple(member(f"t-{i}") for i in range(3))))
    assert decision.placed and decision.hypernode == "zone-a"
    assert sorted(p.node or "" for p in decision.pods) == ["node-a1-0", "node-a1-1", "node-a2-0"]


def test_a_workload_gang_that_fits_no_rack_is_refused_and_its_min_count_is_placed() -> None:
    # KEP-5732: every pod in one domain of the key. Racks have 2 free GPUs; 3 pods do not fit one;
    # with minCount 2 the minimum goes to one rack and the third waits.
    nodes = [labelled(f"n-{r}-{i}", "z", r, free=1) for r in ("r0", "r1") for i in range(2)]
    pods = tuple(member(f"w-{i}") for i in range(3))
    spec = {"schedulingConstraints": {"topology": [{"key": RACK}]}}
    whole = kube_group({**spec, "schedulingPolicy": {"gang": {"minCount": 3}}})
    assert not decide(nodes, GangInput(workload_group=whole, pods=pods)).placed
    minimum = kube_group({**spec, "schedulingPolicy": {"gang": {"minCount": 2}}})
    decision = decide(nodes, GangInput(workload_group=minimum, pods=pods))
    assert decision.placed and decision.partial
    placed = [p.node for p in decision.pods if p.node]
    assert len(placed) == 2 and len({n.split("-")[1] for n in placed}) == 1


def test_kai_subgroups_each_stay_in_one_rack_while_the_job_may_span_the_zone() -> None:
    nodes = [labelled(f"n-{r}-{i}", "z", r, free=2) for r in ("r0", "r1") for i in range(2)]
    spec = {
        "minMember": 8,
        "subGroups": [
            {"name": s, "minMember": 4, "topologyConstraint": {"requiredTopologyLevel": RACK}} for s in ("x", "y")
        ],
    }
    pods = tuple(member(f"{s}-{i}", labels={KAI_SUBGROUP_LABEL: s}) for s in ("x", "y") for i in range(4))
    decision = decide(nodes, GangInput(kai_podgroup=kai_group(spec), pods=pods))
    assert decision.placed
    racks = {s: {p.node.split("-")[1] for p in decision.pods if p.name.startswith(s) and p.node} for s in "xy"}
    assert racks["x"] and racks["y"] and all(len(r) == 1 for r in racks.values())


def test_kueue_multi_layer_slices_place_each_slice_inside_its_enclosing_slice() -> None:
    nodes = [labelled(f"n-{z}{r}-{i}", z, f"{z}{r}", free=2) for z in "ab" for r in "01" for i in range(2)]
    notes = {KUEUE_GROUP: "job", KUEUE_TOTAL: "8", KUEUE_SLICE_LAYERS: layers((ZONE, 4), (RACK, 2))}
    pods = tuple(member(f"p-{i}", labels={"kueue.x-k8s.io/pod-group-pod-index": str(i)}, **notes) for i in range(8))
    decision = decide(nodes, GangInput(pods=pods))
    assert decision.placed
    zone = {p.rank: (p.domain or "").split("/")[0] for p in decision.pods}
    rack = {p.rank: p.domain for p in decision.pods}
    assert all(zone[i] == zone[i - i % 4] for i in range(8))  # ranks 0-3 in one zone, 4-7 in one
    assert all(rack[i] == rack[i - i % 2] for i in range(8))  # each pair in one rack
    assert [p.sub_group for p in decision.pods][:4] == [
        "slice/slice-0/slice2/slice-0", "slice/slice-0/slice2/slice-0",
        "slice/slice-0/slice2/slice-1", "slice/slice-0/slice2/slice-1",
    ]  # fmt: skip


# --- properties ----------------------------------------------------------------------------------
@st.composite
def racks_and_gangs(draw: st.DrawFn) -> tuple[list[NodeState], int, str, int]:
    frees = draw(st.lists(st.integers(0, 8), min_size=2, max_size=8))
    nodes = [labelled(f"n{i}", f"z{i // 4}", f"r{i // 2}", free) for i, free in enumerate(frees)]
    return nodes, draw(st.integers(1, 8)), draw(st.sampled_from([ZONE, RACK])), draw(st.integers(1, 4))


@settings(max_examples=60, deadline=None)
@given(racks_and_gangs(), st.sampled_from(["kube", "kai"]))
def test_a_hard_level_is_never_exceeded_and_the_same_input_gives_the_same_answer(
    case: tuple[list[NodeState], int, str, int], framework: str
) -> None:
    nodes, size, level, gpus = case
    pods = tuple(member(f"w-{i}", gpus) for i in range(size))
    if framework == "kube":
        group = kube_group(
            {"schedulingPolicy": {"gang": {"minCount": size}}, "schedulingConstraints": {"topology": [{"key": level}]}}
        )
        given_gang = GangInput(workload_group=group, pods=pods)
    else:
        kai = kai_group({"minMember": size, "topologyConstraint": {"requiredTopologyLevel": level}})
        given_gang = GangInput(kai_podgroup=kai, pods=pods)
    first, again = decide(nodes, given_gang), decide(nodes, given_gang)
    assert first == again
    placed = [p.node for p in first.pods if p.node]
    if first.placed:
        assert len(placed) == size
        assert len({level_of(n, level, nodes) for n in placed}) == 1
    else:
        assert not placed


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=2, max_size=8),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 4),
)
def test_nested_subgroups_never_leave_their_parents_domain_nor_exceed_their_level(
    frees: list[int], size_a: int, size_b: int, gpus: int
) -> None:
    # KAI: a parent needing one zone, its subgroups a and b each one rack, the job free to span zones.
    nodes = [labelled(f"n{i}", f"z{i // 4}", f"r{i // 2}", free) for i, free in enumerate(frees)]
    spec = {
        "minMember": size_a + size_b,
        "subGroups": [
            {"name": "p", "topologyConstraint": {"requiredTopologyLevel": ZONE}},
            {"name": "a", "parent": "p", "minMember": size_a, "topologyConstraint": {"requiredTopologyLevel": RACK}},
            {"name": "b", "parent": "p", "minMember": size_b, "topologyConstraint": {"requiredTopologyLevel": RACK}},
        ],
    }
    pods = [member(f"a-{i}", gpus, labels={KAI_SUBGROUP_LABEL: "a"}) for i in range(size_a)]
    pods += [member(f"b-{i}", gpus, labels={KAI_SUBGROUP_LABEL: "b"}) for i in range(size_b)]
    given_gang = GangInput(kai_podgroup=kai_group(spec), pods=tuple(pods), minimum_placement=False)
    decision = decide(nodes, given_gang)
    assert decision == decide(nodes, given_gang)
    placed = {p.name: p.node for p in decision.pods if p.node}
    if not decision.placed:
        assert not placed
        return
    assert len(placed) == size_a + size_b
    assert len({level_of(n, ZONE, nodes) for n in placed.values()}) == 1
    for role in "ab":
        assert len({level_of(n, RACK, nodes) for name, n in placed.items() if name.startswith(role)}) == 1


def test_a_kai_parent_keeps_its_subgroups_in_one_zone_each_in_its_rack() -> None:
    # z0: r0 has 2 free GPUs, r1 none; z1: r2 and r3 have 2 each. Alone, "a" would take r0 (the tightest
    # rack) and "b" a rack of z1; their parent needs one zone, so both go to z1, one rack each.
    frees = {"r0": 2, "r1": 0, "r2": 2, "r3": 2}
    nodes = [labelled(f"n-{r}", "z0" if r in ("r0", "r1") else "z1", r, free) for r, free in frees.items()]
    spec = {
        "minMember": 4,
        "subGroups": [
            {"name": "p", "topologyConstraint": {"requiredTopologyLevel": ZONE}},
            *({"name": s, "parent": "p", "minMember": 2, "topologyConstraint": {"requiredTopologyLevel": RACK}}
              for s in "ab"),
        ],
    }  # fmt: skip
    pods = tuple(member(f"{s}-{i}", labels={KAI_SUBGROUP_LABEL: s}) for s in "ab" for i in range(2))
    decision = decide(nodes, GangInput(kai_podgroup=kai_group(spec), pods=pods))
    assert decision.placed
    racks = {s: {p.node for p in decision.pods if p.name.startswith(s)} for s in "ab"}
    assert sorted(map(sorted, racks.values())) == [["n-r2"], ["n-r3"]]
    assert {p.sub_group for p in decision.pods} == {"p/all/a/a", "p/all/b/b"}


def test_kai_segments_on_the_pods_are_rank_slices_inside_their_level() -> None:
    # KAI's segmented-subgroups design: segment-size 4 with a required rack; minMember 12 of 16 pods makes
    # three segments mandatory.
    notes = {"kai.scheduler/segment-size": "4", "kai.scheduler/segment-topology-required-placement": RACK}
    _, (segment,) = kai_policy(kai_group({"minMember": 12}), notes)
    assert (segment.sub_group_size, segment.min_sub_groups, segment.network) == (4, 3, hard(RACK))
    with pytest.raises(FieldError, match="segment-size"):
        kai_policy(kai_group({}), {"kai.scheduler/segment-size": "four"})
    # placed: each segment of 2 consecutive ranks in one rack
    nodes = [labelled(f"n-{r}-{i}", "z", r, free=1) for r in ("r0", "r1") for i in range(2)]
    pods = tuple(
        member(f"w-{i}", labels={"batch.kubernetes.io/job-completion-index": str(i)}, **{
            "kai.scheduler/segment-size": "2", "kai.scheduler/segment-topology-required-placement": RACK})
        for i in range(4)
    )  # fmt: skip
    decision = decide(nodes, GangInput(kai_podgroup=kai_group({"minMember": 4}), pods=pods))
    assert decision.placed
    rack = {p.rank: (p.node or "").split("-")[1] for p in decision.pods}
    assert rack[0] == rack[1] and rack[2] == rack[3]


@pytest.mark.parametrize(
    "gang",
    [
        {"workload_group": {"metadata": {"name": "pg"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                                                             "schedulingConstraints": {"topology": [{"key": RACK}]}}}},
        {"kai_podgroup": {"metadata": {"name": "pg"},
                          "spec": {"minMember": 2, "topologyConstraint": {"requiredTopologyLevel": RACK}}}},
    ],
    ids=["workload_group", "kai_podgroup"],
)  # fmt: skip
def test_a_snapshot_file_gives_the_gang_as_either_framework_writes_it(
    gang: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [labelled(f"n{i}", "z", f"r{i // 2}", free=8) for i in range(4)]
    pods = [{"uid": f"u{i}", "name": f"w-{i}", "requests": {"nvidia.com/gpu": "8"}} for i in range(2)]
    snapshot = {"nodes": msgspec.to_builtins(nodes), "topology_levels": list(LEVELS)}
    path = tmp_path / "gang.json"
    path.write_text(json.dumps({"snapshot": snapshot, "gang": {**gang, "pods": pods}}))
    assert main(["engine", "place", "--snapshot", str(path), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["gang"] == "default/pg" and answer["hypernode"] == "z/r0"


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=2, max_size=8),
    st.tuples(st.integers(1, 3), st.integers(1, 3)),
    st.tuples(st.integers(0, 3), st.integers(0, 3)),
    st.integers(1, 6),
    st.integers(1, 4),
)
def test_nested_subgroups_at_their_minimum_keep_every_level_and_each_subgroups_min_member(
    frees: list[int], sizes: tuple[int, int], minimums: tuple[int, int], min_member: int, gpus: int
) -> None:
    nodes = [labelled(f"n{i}", f"z{i // 4}", f"r{i // 2}", free) for i, free in enumerate(frees)]
    wanted = {s: min(m, n) for s, m, n in zip("ab", minimums, sizes, strict=True)}
    spec = {
        "minMember": min(min_member, sum(sizes)),
        "subGroups": [
            {"name": "p", "topologyConstraint": {"requiredTopologyLevel": ZONE}},
            *({"name": s, "parent": "p", "minMember": wanted[s], "topologyConstraint": {"requiredTopologyLevel": RACK}}
              for s in "ab"),
        ],
    }  # fmt: skip
    pods = tuple(
        member(f"{s}-{i}", gpus, labels={KAI_SUBGROUP_LABEL: s})
        for s, n in zip("ab", sizes, strict=True)
        for i in range(n)
    )
    decision = decide(nodes, GangInput(kai_podgroup=kai_group(spec), pods=pods))
    placed = {p.name: p.node for p in decision.pods if p.node}
    if not decision.placed:
        assert not placed
        return
    assert len(placed) >= spec["minMember"]
    assert len({level_of(n, ZONE, nodes) for n in placed.values()}) == 1
    for s in "ab":
        mine = [n for name, n in placed.items() if name.startswith(s)]
        assert len({level_of(n, RACK, nodes) for n in mine}) <= 1
        assert len(mine) >= wanted[s]  # never below a subgroup's minMember


def test_nested_subgroups_that_fit_only_at_their_minimum_are_placed_at_it() -> None:
    # One zone: r0 has 2 free GPUs, r1 one. "a" (2, minMember 2) fills r0; "b" (2, minMember 1) has one
    # member in r1 and one waiting: the PodGroup's minMember 3 is met.
    nodes = [labelled("n-r0", "z0", "r0", 2), labelled("n-r1", "z0", "r1", 1)]
    spec = {
        "minMember": 3,
        "subGroups": [
            {"name": "p", "topologyConstraint": {"requiredTopologyLevel": ZONE}},
            {"name": "a", "parent": "p", "minMember": 2, "topologyConstraint": {"requiredTopologyLevel": RACK}},
            {"name": "b", "parent": "p", "minMember": 1, "topologyConstraint": {"requiredTopologyLevel": RACK}},
        ],
    }
    pods = tuple(member(f"{s}-{i}", labels={KAI_SUBGROUP_LABEL: s}) for s in "ab" for i in range(2))
    decision = decide(nodes, GangInput(kai_podgroup=kai_group(spec), pods=pods))
    assert decision.placed and decision.partial
    assert {p.name: p.node for p in decision.pods} == {"a-0": "n-r0", "a-1": "n-r0", "b-0": "n-r1", "b-1": None}
