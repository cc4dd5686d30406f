"""Gangs on the network tree: the tier walk, hard and soft limits, tier names, subgroups, running members,
joint device choice, deterministic ties, all or nothing — on Volcano's documented tree and generated ones."""

from __future__ import annotations

import random

import msgspec
import pytest
from engine_builders import fixture_node
from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import hn, node, sub, volcano_example

from engine import Allocation, NodeState, PodRequest, RequestError, WorkloadClass, new_index, place_gang
from engine.cluster.network import build_tree
from engine.decide.gang import GangDecision, GangRequest
from engine.node.vendors import registry
from schemas.events import NetworkConstraint, SubGroupPolicy, TopologyMode
from schemas.kube import HostPort

H100 = "dgx-h100"
EIGHT_NODES = [f"node{i}" for i in range(8)]


def cluster(busy: dict[str, list[int]] | None = None, names: list[str] = EIGHT_NODES) -> list[NodeState]:
    busy = busy or {}
    return [fixture_node(n, H100, busy=busy.get(n, [])) for n in names]


def member(i: int, gpus: int = 8, *, node_name: str = "", labels: dict[str, str] | None = None) -> PodRequest:
    return PodRequest(
        uid=f"uid-{i}",
        name=f"worker-{i:02d}",
        requests={"nvidia.com/gpu": str(gpus)},
        node_name=node_name,
        labels=labels or {},
    )


def decide(
    nodes: list[NodeState],
    hypernodes: list[object],
    pods: list[PodRequest],
    network: NetworkConstraint | None = None,
    sub_groups: tuple[SubGroupPolicy, ...] = (),
    levels: tuple[str, ...] = (),
) -> GangDecision:
    index = new_index()
    for n in nodes:
        index.upsert(n)
    tree = build_tree(hypernodes, {n.name: n.labels for n in nodes}, topology_levels=levels).tree  # type: ignore[arg-type]
    gang = GangRequest(name="ns/job", min_member=len(pods), network=network, sub_groups=sub_groups, pods=tuple(pods))
    return place_gang(registry, index, tree, gang)


def hard(tier: int) -> NetworkConstraint:
    return NetworkConstraint(mode=TopologyMode.HARD, highest_tier=tier)


def nodes_of(decision: GangDecision) -> list[str]:
    return [p.node or "" for p in decision.pods]


# --- the tier walk ---------------------------------------------------------------------------


def test_two_members_land_under_one_tor_at_tier_1() -> None:
    decision = decide(cluster(), volcano_example(), [member(0), member(1)], hard(1))
    assert decision.placed
    assert decision.tier == 1
    assert decision.hypernode == "s0"  # every ToR fits; ties go to the name
    assert nodes_of(decision) == ["node0", "node1"]
    assert all(len(p.devices) == 8 for p in decision.pods)


def test_a_busy_tor_is_skipped_for_the_next_one_at_the_same_tier() -> None:
    decision = decide(cluster({"node0": [0]}), volcano_example(), [member(0), member(1)], hard(1))
    assert decision.hypernode == "s1"
    assert sorted(nodes_of(decision)) == ["node2", "node3"]


def test_four_members_need_tier_2_and_stay_in_one_spine() -> None:
    decision = decide(cluster({"node0": [3]}), volcano_example(), [member(i) for i in range(3)], hard(2))
    assert decision.placed
    assert decision.tier == 2
    assert decision.hypernode == "s4"
    # the fuller ToR s1 (both nodes free) is filled first, then one node of s0
    assert sorted(nodes_of(decision)) == ["node1", "node2", "node3"]


def test_hard_never_goes_above_the_allowed_tier() -> None:
    decision = decide(cluster(), volcano_example(), [member(i) for i in range(3)], hard(1))
    assert not decision.placed
    assert all(p.node is None for p in decision.pods)
    assert "no hypernode of tier <= 1" in decision.reason
    assert "at most 2 fit in one" in decision.reason


def test_soft_prefers_the_lowest_tier_but_never_fails_for_the_network() -> None:
    soft = NetworkConstraint(mode=TopologyMode.SOFT, highest_tier=1)
    decision = decide(cluster(), volcano_example(), [member(i) for i in range(5)], soft)
    assert decision.placed
    assert decision.tier == 3
    two = decide(cluster(), volcano_example(), [member(0), member(1)], soft)
    assert two.tier == 1


def test_tier_names_resolve_like_volcano_highest_tier_name() -> None:
    tree = [
        hn("tor-a", 1, node("node0"), node("node1"), tier_name="leaf"),
        hn("tor-b", 1, node("node2"), node("node3"), tier_name="leaf"),
        hn("spine", 2, sub("tor-a"), sub("tor-b"), tier_name="spine"),
    ]
    by_name = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="leaf")
    assert not decide(cluster(names=EIGHT_NODES[:4]), tree, [member(i) for i in range(3)], by_name).placed
    by_spine = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="spine")
    assert decide(cluster(names=EIGHT_NODES[:4]), tree, [member(i) for i in range(3)], by_spine).tier == 2
    with pytest.raises(RequestError) as caught:
        decide(cluster(names=EIGHT_NODES[:4]), tree, [member(0)], NetworkConstraint(highest_tier_name="rack"))
    assert caught.value.field == "network.highestTierName"


def test_a_gang_that_cannot_fit_anywhere_places_no_member() -> None:
    decision = decide(cluster(), volcano_example(), [member(i) for i in range(9)])
    assert not decision.placed
    assert [p.node for p in decision.pods] == [None] * 9
    assert decision.reason.endswith("0/8 nodes are available: 8 node(s) had room for only part of the gang.")


# --- running members, subgroups, label levels ---------------------------------------------------


def test_a_later_member_stays_inside_the_domain_of_the_running_ones() -> None:
    # Two members run in s2 (node4, node5 full); the third may only go within tier 2 around them: s5.
    busy = {"node4": list(range(8)), "node5": list(range(8))}
    pods = [member(0, node_name="node4"), member(1, node_name="node5"), member(2)]
    decision = decide(cluster(busy), volcano_example(), pods, hard(2))
    assert decision.placed
    placed = [p for p in decision.pods if not p.running]
    assert [p.node for p in placed] == ["node6"]
    assert decision.hypernode == "s5"
    running = {p.name: p.node for p in decision.pods if p.running}
    assert running == {"worker-00": "node4", "worker-01": "node5"}


def test_running_members_pin_even_when_a_closer_empty_tor_exists_elsewhere() -> None:
    busy = {"node6": list(range(8)), "node7": list(range(8))}
    pods = [member(0, node_name="node6"), member(1, node_name="node7"), member(2), member(3)]
    decision = decide(cluster(busy), volcano_example(), pods, hard(3))
    new_nodes = sorted(p.node or "" for p in decision.pods if not p.running)
    assert new_nodes == ["node4", "node5"]  # the sibling ToR under s5, not s0 under s4
    assert decision.tier == 2


def test_subgroups_each_stay_within_their_own_tier() -> None:
    labels = [{"role": "a"}, {"role": "a"}, {"role": "b"}, {"role": "b"}]
    pods = [member(i, labels=labels[i]) for i in range(4)]
    policy = SubGroupPolicy(name="pairs", match_label_keys=("role",), network=hard(1))
    decision = decide(cluster(), volcano_example(), pods, hard(2), sub_groups=(policy,))
    assert decision.placed
    by_role: dict[str, set[str]] = {}
    tor = {f"node{i}": f"s{i // 2}" for i in range(8)}
    for p, pod in zip(sorted(decision.pods, key=lambda p: p.uid), pods, strict=True):
        by_role.setdefault(pod.labels["role"], set()).add(tor[p.node or ""])
    assert all(len(tors) == 1 for tors in by_role.values())


def test_kueue_label_levels_make_the_same_tree() -> None:
    def labelled(name: str, block: str, rack: str) -> NodeState:
        base = fixture_node(name, H100)
        labels = {"cloud/block": block, "cloud/rack": rack, "kubernetes.io/hostname": name}
        return msgspec.structs.replace(base, labels=labels)

    nodes = [labelled("n1", "b1", "r1"), labelled("n2", "b1", "r1"), labelled("n3", "b1", "r2")]
    levels = ("cloud/block", "cloud/rack", "kubernetes.io/hostname")
    rack = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="cloud/rack")
    decision = decide(nodes, [], [member(0), member(1)], rack, levels=levels)
    assert decision.placed
    assert sorted(nodes_of(decision)) == ["n1", "n2"]
    assert not decide(nodes, [], [member(i) for i in range(3)], rack, levels=levels).placed


# --- joint device and network choice -----------------------------------------------------------


def test_members_get_nvlink_sets_and_the_domain_that_keeps_them_whole() -> None:
    # s0's nodes each have 4 GPUs busy; s1's are empty: 4-GPU members fit both, but on s0 they take the
    # leftover halves and keep s1's whole 8-sets for later: binpack by the members' device scores.
    busy = {"node0": [0, 1, 2, 3], "node1": [0, 1, 2, 3]}
    tree = volcano_example()[:2] + [hn("s4", 2, sub("s0"), sub("s1"))]
    decision = decide(cluster(busy, EIGHT_NODES[:4]), tree, [member(0, 4), member(1, 4)], hard(1))
    assert decision.hypernode == "s0"
    for p in decision.pods:
        assert sorted(d.index for d in p.devices) == [4, 5, 6, 7]
        assert all(d.uuid for d in p.devices)


# --- properties on generated trees ----------------------------------------------------------------


@st.composite
def generated(draw: st.DrawFn) -> tuple[list[NodeState], list[object], list[PodRequest], NetworkConstraint]:
    tors = draw(st.integers(1, 4))
    per_tor = draw(st.integers(1, 3))
    names = [f"n{t}-{i}" for t in range(tors) for i in range(per_tor)]
    rng = random.Random(draw(st.integers(0, 10_000)))
    nodes = [fixture_node(n, H100, busy=sorted(rng.sample(range(8), rng.choice((0, 0, 2, 4, 8))))) for n in names]
    hypernodes: list[object] = [hn(f"tor{t}", 1, *(node(f"n{t}-{i}") for i in range(per_tor))) for t in range(tors)]
    hypernodes.append(hn("spine", 2, *(sub(f"tor{t}") for t in range(tors))))
    pods = [member(i, draw(st.sampled_from((1, 2, 4, 8)))) for i in range(draw(st.integers(1, 5)))]
    constraint = NetworkConstraint(mode=draw(st.sampled_from(list(TopologyMode))), highest_tier=draw(st.integers(1, 3)))
    return nodes, hypernodes, pods, constraint


@settings(max_examples=60, deadline=None)
@given(generated())
def test_all_or_nothing_the_hard_tier_and_determinism_hold(
    case: tuple[list[NodeState], list[object], list[PodRequest], NetworkConstraint],
) -> None:
    nodes, hypernodes, pods, constraint = case
    decision = decide(nodes, hypernodes, pods, constraint)
    placed = [p.node is not None for p in decision.pods]
    assert all(placed) or not any(placed)  # all or nothing
    if decision.placed and constraint.mode is TopologyMode.HARD:
        assert decision.tier is not None and decision.tier <= constraint.highest_tier  # type: ignore[operator]
    if decision.placed:
        held: dict[tuple[str, int], int] = {}
        for p in decision.pods:
            for d in p.devices:
                held[(p.node or "", d.index)] = held.get((p.node or "", d.index), 0) + 1
        busy = {(n.name, a.index) for n in nodes for a in n.allocations}
        assert all(count == 1 for count in held.values())  # no device twice
        assert not busy & set(held)  # nothing already held
    again = decide(list(reversed(nodes)), list(reversed(hypernodes)), list(reversed(pods)), constraint)
    assert again == decision  # same input, same answer, whatever the order


def test_a_member_already_holding_devices_counts_against_its_node() -> None:
    full = fixture_node("node0", H100)
    held = msgspec.structs.replace(full, allocations=tuple(Allocation(pod_uid="x", index=i) for i in range(8)))
    decision = decide([held, fixture_node("node1", H100)], [], [member(0)], None)
    assert nodes_of(decision) == ["node1"]


def test_kueue_slices_each_stay_within_their_level_under_a_required_block() -> None:
    from engine.core.model import GangInput
    from engine.decide.gang.input import gang_request
    from schemas.gangs import KUEUE_GROUP, KUEUE_REQUIRED, KUEUE_SLICE_REQUIRED, KUEUE_SLICE_SIZE, KUEUE_TOTAL

    levels = ("cloud/block", "cloud/rack", "kubernetes.io/hostname")

    def labelled(name: str, rack: str) -> NodeState:
        base = fixture_node(name, H100)
        return msgspec.structs.replace(base, labels={levels[0]: "b1", levels[1]: rack, levels[2]: name})

    nodes = [labelled(f"n{i}", f"r{i // 2}") for i in range(6)]  # three racks of two nodes
    annotations = {
        KUEUE_GROUP: "bert",
        KUEUE_TOTAL: "4",
        KUEUE_REQUIRED: levels[0],
        KUEUE_SLICE_REQUIRED: levels[1],
        KUEUE_SLICE_SIZE: "2",
    }
    pods = tuple(
        PodRequest(
            uid=f"u{i}", name=f"bert-{i}", namespace="ml", requests={"nvidia.com/gpu": "8"}, annotations=annotations
        )
        for i in range(4)
    )
    gang = gang_request(GangInput(pods=pods))
    assert (gang.name, gang.min_member) == ("ml/bert", 4)
    index = new_index()
    for n in nodes:
        index.upsert(n)
    tree = build_tree([], {n.name: n.labels for n in nodes}, topology_levels=levels).tree
    decision = place_gang(registry, index, tree, gang)
    assert decision.placed
    rack = {n.name: n.labels[levels[1]] for n in nodes}
    by_slice = [{rack[p.node or ""] for p in decision.pods[i : i + 2]} for i in (0, 2)]
    assert all(len(racks) == 1 for racks in by_slice)  # each slice of two inside one rack


def test_a_gang_under_the_fragmentation_policy_places_its_cpu_only_members_too() -> None:
    # A launcher without GPUs and two 4-GPU workers, all under the fragmentation policy with a known
    # workload: the launcher is scored by the policy (a host request with no devices) and the gang
    # is placed whole, the launcher holding no device.
    policy = {"hami.io/node-scheduler-policy": "fragmentation"}
    workers = [msgspec.structs.replace(member(i, 4), annotations=policy) for i in range(2)]
    launcher = PodRequest(uid="uid-l", name="launcher", requests={"cpu": "1"}, annotations=policy)
    index = new_index()
    for n in cluster(names=["node0", "node1"]):
        index.upsert(n)
    tree = build_tree([], {n: {} for n in ("node0", "node1")}).tree
    gang = GangRequest(name="ns/job", min_member=3, pods=(launcher, *workers))
    workload = (WorkloadClass(gpus=4), WorkloadClass(gpus=0))
    decision = place_gang(registry, index, tree, gang, workload=workload)
    assert decision.placed
    by_name = {p.name: p for p in decision.pods}
    assert by_name["launcher"].devices == ()
    assert "frag_level" in by_name["launcher"].score_parts
    assert all(len(by_name[w.name].devices) == 4 for w in workers)


def test_members_asking_for_one_host_port_never_share_a_node() -> None:
    # Two 1-GPU members wanting host port 29500: each node holds 8 GPUs but only one of them (NodePorts).
    port = (HostPort(port=29500),)
    pods = [msgspec.structs.replace(member(i, 1), host_ports=port) for i in range(2)]
    decision = decide(cluster(), volcano_example(), pods, hard(1))
    assert decision.placed
    assert sorted(nodes_of(decision)) == ["node0", "node1"]
    taken = [msgspec.structs.replace(n, host_ports=port) for n in cluster(names=["node0"])]
    assert not decide([*taken, *cluster(names=["node1"])], [], pods).placed
