"""Gangs under InterPodAffinity and PodTopologySpread: members hold to the pods running on the cluster and
to each other (a member placed earlier in the plan counts as running for the later ones), inside the
chosen hypernode."""

from __future__ import annotations

from collections import Counter

import msgspec
from engine_builders import fixture_node
from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import volcano_example
from pod_topology_builders import HOSTNAME, ZONE, affinities, running, spread, term

from engine import NodeState, PodRequest, new_index, place_gang
from engine.cluster.network import build_tree
from engine.core.model import PlacedPod
from engine.decide.gang import GangDecision, GangRequest
from engine.node.vendors import registry

H100 = "dgx-h100"
NAMES = [f"node{i}" for i in range(8)]
WEB = {"app": "web"}
ONE_PER_NODE = affinities(anti=(term(HOSTNAME, labels=WEB),))


def kube_h100(name: str, zone: str, *pods: PlacedPod) -> NodeState:
    base = fixture_node(name, H100)
    return msgspec.structs.replace(base, labels={**base.labels, HOSTNAME: name, ZONE: zone}, running=pods)


def zone_of(name: str) -> str:
    return f"zone-{int(name[4:]) // 2}"  # one zone per ToR of Volcano's example tree


def member(i: int, gpus: int, **fields: object) -> PodRequest:
    return PodRequest(
        uid=f"uid-{i}", name=f"worker-{i:02d}", requests={"nvidia.com/gpu": str(gpus)}, labels=WEB, **fields
    )  # type: ignore[arg-type]


def decide(nodes: list[NodeState], pods: list[PodRequest]) -> GangDecision:
    index = new_index()
    for n in nodes:
        index.upsert(n)
    tree = build_tree(volcano_example(), {n.name: n.labels for n in nodes}).tree  # type: ignore[arg-type]
    gang = GangRequest(name="ns/job", min_member=len(pods), pods=tuple(pods))
    return place_gang(registry, index, tree, gang)


def nodes_of(decision: GangDecision) -> list[str]:
    return [p.node for p in decision.pods if p.node is not None and not p.running]


def test_anti_affinity_one_per_node_spreads_a_gang_that_would_share_a_node() -> None:
    cluster = [kube_h100(n, zone_of(n)) for n in NAMES]
    decision = decide(cluster, [member(i, 2, affinities=ONE_PER_NODE) for i in range(4)])
    assert decision.placed
    assert sorted(nodes_of(decision)) == ["node0", "node1", "node2", "node3"]
    assert decision.hypernode == "s4"  # a ToR has two nodes: four members need the tier above


def test_without_anti_affinity_the_same_gang_shares_one_node() -> None:
    cluster = [kube_h100(n, zone_of(n)) for n in NAMES]
    decision = decide(cluster, [member(i, 2) for i in range(4)])
    assert set(nodes_of(decision)) == {"node0"}


def test_a_running_pod_the_members_avoid_keeps_them_off_its_node() -> None:
    cluster = [kube_h100(n, zone_of(n), *([running("web-0", **WEB)] if n == "node0" else [])) for n in NAMES]
    decision = decide(cluster, [member(i, 1, affinities=ONE_PER_NODE) for i in range(2)])
    assert decision.placed
    assert sorted(nodes_of(decision)) == ["node2", "node3"]  # node0 is taken, s0 then holds one: s1


def test_a_running_pods_anti_affinity_against_the_members_keeps_them_off_its_node() -> None:
    guard = running("guard", affinity=affinities(anti=(term(HOSTNAME, labels=WEB),)), app="db")
    cluster = [kube_h100(n, zone_of(n), *([guard] if n == "node0" else [])) for n in NAMES]
    decision = decide(cluster, [member(i, 8) for i in range(2)])
    assert sorted(nodes_of(decision)) == ["node2", "node3"]


def test_zone_spread_puts_one_member_in_each_zone_inside_the_chosen_hypernode() -> None:
    cluster = [kube_h100(n, zone_of(n)) for n in NAMES]
    constraint = (spread(ZONE, 1, labels=WEB),)
    decision = decide(cluster, [member(i, 1, topology_spread_constraints=constraint) for i in range(4)])
    assert decision.placed
    zones = Counter(zone_of(n) for n in nodes_of(decision))
    assert sorted(zones.values()) == [1, 1, 1, 1]
    assert decision.hypernode == "s6"


def test_an_unsatisfiable_anti_affinity_leaves_the_gang_unplaced() -> None:
    cluster = [kube_h100(n, zone_of(n)) for n in NAMES]
    decision = decide(cluster, [member(i, 1, affinities=ONE_PER_NODE) for i in range(9)])
    assert not decision.placed


@settings(max_examples=150, deadline=None)
@given(
    occupied=st.lists(st.sampled_from(NAMES), max_size=6),
    count=st.integers(1, 8),
    gpus=st.sampled_from((1, 2, 4)),
    spread_key=st.sampled_from((None, HOSTNAME, ZONE)),
    max_skew=st.integers(1, 3),
)
def test_a_gangs_placement_never_breaks_anti_affinity_nor_max_skew(
    occupied: list[str], count: int, gpus: int, spread_key: str | None, max_skew: int
) -> None:
    """Running replicas on `occupied` nodes; a gang of `count` members with one-per-node anti-affinity
    (`spread_key` None) or a DoNotSchedule spread over `spread_key`."""
    cluster = [
        kube_h100(n, zone_of(n), *(running(f"web-{n}-{k}", **WEB) for k in range(occupied.count(n)))) for n in NAMES
    ]
    constraint = None if spread_key is None else spread(spread_key, max_skew, labels=WEB)
    pods = [
        member(i, gpus, affinities=ONE_PER_NODE)
        if constraint is None
        else member(i, gpus, topology_spread_constraints=(constraint,))
        for i in range(count)
    ]
    decision = decide(cluster, pods)
    if not decision.placed:
        return
    placed = nodes_of(decision)
    assert len(placed) == len(pods)
    web = Counter(n.name for n in cluster for p in n.running if p.labels == WEB)
    if constraint is None:
        assert len(set(placed)) == len(placed)  # one member per node
        assert not set(placed) & set(web)  # never beside a running replica
        return
    domain = (lambda n: n) if constraint.topology_key == HOSTNAME else zone_of
    before = Counter({domain(n): 0 for n in NAMES})
    before.update(domain(n) for n in web.elements())
    after = before + Counter(domain(n) for n in placed)
    after.update({d: 0 for d in before})
    low = min(after[d] for d in before)
    assert all(after[domain(n)] - low <= constraint.max_skew for n in placed)


def test_members_of_different_shapes_hold_to_each_others_anti_affinity() -> None:
    cluster = [kube_h100(n, zone_of(n)) for n in NAMES]
    small = [member(i, 1, affinities=ONE_PER_NODE) for i in range(2)]
    large = [member(i, 2, affinities=ONE_PER_NODE) for i in range(2, 4)]
    decision = decide(cluster, small + large)
    assert decision.placed
    assert len(set(nodes_of(decision))) == 4


def test_per_member_labels_leave_members_one_shape_that_shares_a_node() -> None:
    guard = running("guard", affinity=affinities(anti=(term(HOSTNAME, labels={"app": "db"}),)), app="db")
    cluster = [kube_h100(n, zone_of(n), *([guard] if n == "node7" else [])) for n in NAMES]
    pods = [
        PodRequest(
            uid=f"uid-{i}",
            name=f"worker-{i}",
            requests={"nvidia.com/gpu": "1"},
            labels={**WEB, "statefulset.kubernetes.io/pod-name": f"worker-{i}", "apps.kubernetes.io/pod-index": str(i)},
        )
        for i in range(8)
    ]
    decision = decide(cluster, pods)  # a running pod has anti-affinity: the members' labels are read
    assert set(nodes_of(decision)) == {"node0"}
