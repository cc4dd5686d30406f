"""MetaX through engine.place(): zones, node score, QoS, whole cards, request errors.

Nodes come from the collector's metax-8gpu-2zone fixture (8 MXC500 cards,
MetaXLink zones 1 = cards 0-3 and 2 = cards 4-7) or are built per case.
"""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import place

from engine import (
    Allocation,
    Decision,
    Mode,
    NodeState,
    PodRequest,
    RequestError,
    Snapshot,
)
from engine.node.vendors.metax.gpu import (
    LOSSES_ANNOTATION,
    SCORES_ANNOTATION,
)
from schemas.topology import Device, Vendor
from services.collector.node.topology_files import load_topology

SGPU = "metax-tech.com/sgpu"
GPU = "metax-tech.com/gpu"
TOPOLOGY_AWARE = "metax-tech.com/sgpu-topology-aware"
QOS = "metax-tech.com/sgpu-qos-policy"
NODE_POLICY = "hami.io/node-scheduler-policy"
GPU_POLICY = "hami.io/gpu-scheduler-policy"
BOTH_MODES = pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])


def fixture_node(name: str = "mx-a", busy: tuple[int, ...] = ()) -> NodeState:
    topology = load_topology("metax-8gpu-2zone", node=name)
    allocations = tuple(Allocation(pod_uid=f"busy-{i}", index=i) for i in busy)
    return NodeState(
        name=name,
        machine_type=topology.machine_type,
        devices=topology.devices,
        links=topology.links,
        allocations=allocations,
    )


def card(index: int, zone: int | None, memory_mib: int = 65536) -> Device:
    return Device(
        index=index,
        uuid=f"MX-{index}",
        vendor=Vendor.METAX,
        model="MXC500",
        memory_mib=memory_mib,
        link_zone=zone,
    )


def built_node(
    name: str,
    zones: dict[int, int | None],
    busy: tuple[int, ...] = (),
    annotations: dict[str, str] | None = None,
) -> NodeState:
    return NodeState(
        name=name,
        machine_type="metax",
        devices=tuple(card(i, z) for i, z in sorted(zones.items())),
        allocations=tuple(Allocation(pod_uid=f"busy-{i}", index=i) for i in busy),
        annotations=annotations or {},
    )


def pod(requests: dict[str, str], annotations: dict[str, str] | None = None) -> PodRequest:
    return PodRequest(uid="pod-1", name="pod-1", requests=requests, annotations=annotations or {})


def indices(decision: Decision) -> set[int]:
    return {a.index for a in decision.devices}


def test_the_fixture_has_two_zones_of_four() -> None:
    zones = {d.index: d.link_zone for d in load_topology("metax-8gpu-2zone").devices}
    assert zones == {0: 1, 1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2, 7: 2}


# --- exclusive multi-card choice -------------------------------------------------------------------


@BOTH_MODES
def test_exclusive_request_takes_the_smallest_zone_that_holds_it(mode: Mode) -> None:
    # zone 1 has 2 idle cards (2, 3), zone 2 has 4: two cards go to zone 1
    decision = place(Snapshot(nodes=(fixture_node(busy=(0, 1)),)), pod({SGPU: "2"}), mode)
    assert decision.node == "mx-a"
    assert indices(decision) == {2, 3}
    assert all(a.cores == 100 and a.memory_mib == 0 for a in decision.devices)


@BOTH_MODES
def test_exclusive_request_fills_zones_smallest_first(mode: Mode) -> None:
    # idle: 2, 3 (zone 1) and 7 (zone 2); 3 cards: no zone holds 3, zone 2 (1 idle) then zone 1
    decision = place(Snapshot(nodes=(fixture_node(busy=(0, 1, 4, 5, 6)),)), pod({SGPU: "3"}), mode)
    assert indices(decision) == {2, 3, 7}


def test_default_mode_keeps_the_better_set_when_zone_filling_is_worse() -> None:
    node = built_node("mx-b", {0: 1, 1: 1, 2: 2, 3: 2, 4: 2, 5: 3, 6: 3, 7: 3})
    hami = place(Snapshot(nodes=(node,)), pod({SGPU: "4"}), Mode.HAMI)
    default = place(Snapshot(nodes=(node,)), pod({SGPU: "4"}), Mode.DEFAULT)
    assert hami.score_parts["zone_score"] == 20.0  # 1 pair in zone 1 + 1 pair in zone 2
    assert default.score_parts["zone_score"] == 30.0  # all 3 pairs of zone 2
    assert indices(default) == {0, 2, 3, 4}


@BOTH_MODES
def test_cards_without_a_zone_come_last(mode: Mode) -> None:
    node = built_node("mx-c", {0: None, 1: None, 2: 1, 3: 1, 4: 0, 5: -1})
    decision = place(Snapshot(nodes=(node,)), pod({SGPU: "3"}), mode)
    assert {2, 3} <= indices(decision)
    assert len(indices(decision)) == 3


def test_no_zone_at_all_takes_the_lowest_cards_in_default_mode() -> None:
    node = built_node("mx-d", {i: None for i in range(4)})
    assert indices(place(Snapshot(nodes=(node,)), pod({SGPU: "2"}))) == {0, 1}


# --- topology-aware node score ----------------------------------------------------------------------


def test_node_score_is_ten_times_allocated_minus_loss_and_picks_the_node() -> None:
    # mx-a: all idle, 2 cards from a zone of 4 cut 2 x 2 pairs: 10 x 10 - 40 = 60
    # mx-b: zone 1 has exactly 2 idle cards, zone 2 is busy: 10 x 10 - 0 = 100
    a = fixture_node("mx-a")
    b = fixture_node("mx-b", busy=(0, 1, 4, 5, 6, 7))
    decision = place(Snapshot(nodes=(a, b)), pod({SGPU: "2"}))
    assert decision.node == "mx-b"
    assert decision.score_parts["topology"] == 100.0
    assert decision.score_parts["loss"] == 0.0
    loser = decision.alternatives[0]
    assert loser.node == "mx-a" and loser.fits
    assert 60.0 <= loser.score < 61.0  # 60 plus a fill term below 1
    assert "topology 60 vs 100" in loser.reason


def test_topology_aware_false_leaves_the_node_to_the_fill_policy() -> None:
    a = fixture_node("mx-a")
    b = fixture_node("mx-b", busy=(0, 1, 4, 5, 6, 7))
    spread = {TOPOLOGY_AWARE: "false", NODE_POLICY: "spread"}
    decision = place(Snapshot(nodes=(a, b)), pod({SGPU: "2"}, spread))
    assert decision.node == "mx-a"  # the emptier node under spread
    assert "topology" not in decision.score_parts


def test_hami_mode_scores_topology_only_when_the_pod_asks() -> None:
    a = fixture_node("mx-a")
    b = fixture_node("mx-b", busy=(0, 1, 4, 5, 6, 7))
    plain = place(Snapshot(nodes=(a, b)), pod({SGPU: "2"}, {NODE_POLICY: "spread"}), Mode.HAMI)
    assert plain.node == "mx-a"  # HAMi's usage alone: spread prefers the empty node
    aware = place(Snapshot(nodes=(a, b)), pod({SGPU: "2"}, {NODE_POLICY: "spread", TOPOLOGY_AWARE: "true"}), Mode.HAMI)
    assert aware.node == "mx-b"  # 10000 x (100 vs 60) outweighs any usage difference
    assert aware.score_parts["topology"] == 100.0


# --- sharing and QoS ------------------------------------------------------------------------------


def shared(qos: str, **extra: str) -> PodRequest:
    requests = {SGPU: "1", "metax-tech.com/vcore": "20", "metax-tech.com/vmemory": "8"}
    return pod(requests, {QOS: qos, **extra})


def single_card_node(holder_qos: str) -> NodeState:
    return NodeState(
        name="mx-one",
        machine_type="metax",
        devices=(card(0, 1),),
        allocations=(Allocation(pod_uid="holder", index=0, memory_mib=8192, cores=30, qos=holder_qos),),
    )


def test_a_card_in_use_accepts_its_own_qos() -> None:
    decision = place(Snapshot(nodes=(single_card_node("fixed-share"),)), shared("fixed-share"))
    assert decision.node == "mx-one"
    assert decision.devices[0].cores == 20 and decision.devices[0].memory_mib == 8 * 1024


def test_a_card_in_use_refuses_another_qos_with_the_reason() -> None:
    decision = place(Snapshot(nodes=(single_card_node("fixed-share"),)), shared("best-effort"))
    assert decision.node is None
    assert "runs fixed-share pods; the pod's QoS is best-effort" in decision.alternatives[0].reason


def test_a_pod_without_qos_is_best_effort() -> None:
    requests = {SGPU: "1", "metax-tech.com/vcore": "20", "metax-tech.com/vmemory": "8"}
    refused = place(Snapshot(nodes=(single_card_node("burst-share"),)), pod(requests))
    assert refused.node is None and "the pod's QoS is best-effort" in refused.alternatives[0].reason
    accepted = place(Snapshot(nodes=(single_card_node("best-effort"),)), pod(requests))
    assert accepted.node == "mx-one"


def test_binpack_shares_join_the_busy_card_of_the_same_qos() -> None:
    node = NodeState(
        name="mx-two",
        machine_type="metax",
        devices=(card(0, 1), card(1, 1)),
        allocations=(Allocation(pod_uid="holder", index=1, memory_mib=8192, cores=30, qos="fixed-share"),),
    )
    same = place(Snapshot(nodes=(node,)), shared("fixed-share", **{GPU_POLICY: "binpack"}))
    assert indices(same) == {1}
    other = place(Snapshot(nodes=(node,)), shared("burst-share", **{GPU_POLICY: "binpack"}))
    assert indices(other) == {0}  # the idle card takes any QoS


def test_vcore_100_needs_an_idle_card_whatever_the_qos() -> None:
    decision = place(Snapshot(nodes=(single_card_node("best-effort"),)), pod({SGPU: "1"}))
    assert decision.node is None
    reason = decision.alternatives[0].reason
    assert "MiB free" in reason or "needs the card alone" in reason


def test_an_online_pod_holds_no_compute_share() -> None:
    decision = place(
        Snapshot(nodes=(built_node("mx-e", {0: 1}),)),
        pod({SGPU: "1", "metax-tech.com/vmemory": "4"}, {"metax-tech.com/sgpu-app-class": "online"}),
    )
    assert decision.node == "mx-e"
    assert decision.devices[0].cores == 0 and decision.devices[0].memory_mib == 4096
    assert decision.score_parts["online_penalty"] == 0.0


# --- whole cards: node annotations -------------------------------------------------------------------


def whole_node(name: str, annotations: dict[str, str]) -> NodeState:
    return built_node(name, {i: None for i in range(4)}, annotations=annotations)


def test_binpack_prefers_the_lower_loss() -> None:
    a = whole_node("mx-a", {LOSSES_ANNOTATION: '{"2": 300}'})
    b = whole_node("mx-b", {LOSSES_ANNOTATION: '{"2": 100}'})
    decision = place(Snapshot(nodes=(a, b)), pod({GPU: "2"}))
    assert decision.node == "mx-b"
    assert decision.score_parts["topology_preference"] == 2000 - 100
    assert all(x.cores == 100 for x in decision.devices)


def test_spread_prefers_the_higher_score() -> None:
    a = whole_node("mx-a", {SCORES_ANNOTATION: '{"2": 900}'})
    b = whole_node("mx-b", {SCORES_ANNOTATION: '{"2": 500}'})
    decision = place(Snapshot(nodes=(a, b)), pod({GPU: "2"}, {NODE_POLICY: "spread"}))
    assert decision.node == "mx-a"
    assert decision.score_parts["topology_preference"] == 900


def test_a_missing_annotation_falls_back_to_the_other_one() -> None:
    a = whole_node("mx-a", {SCORES_ANNOTATION: '{"2": 1900}'})  # no losses
    b = whole_node("mx-b", {LOSSES_ANNOTATION: '{"2": 300}'})
    default = place(Snapshot(nodes=(a, b)), pod({GPU: "2"}))
    assert default.node == "mx-a"  # 1900 from its scores beats 2000 - 300
    assert any(w.startswith("mx-a:") and LOSSES_ANNOTATION in w for w in default.warnings)
    hami = place(Snapshot(nodes=(a, b)), pod({GPU: "2"}), Mode.HAMI)
    assert hami.node == "mx-b"  # HAMi reads losses only: mx-a gets nothing


def test_whole_cards_skip_busy_cards_with_the_reason() -> None:
    node = built_node("mx-f", {0: None, 1: None}, busy=(0,))
    decision = place(Snapshot(nodes=(node,)), pod({GPU: "2"}))
    assert decision.node is None
    assert "takes whole idle cards" in decision.alternatives[0].reason


# --- unschedulable reasons and request errors ----------------------------------------------------------


def test_unhealthy_and_pinned_cards_are_named() -> None:
    devices = (msgspec.structs.replace(card(0, 1), healthy=False), card(1, 1))
    node = NodeState(name="mx-g", machine_type="metax", devices=devices)
    decision = place(Snapshot(nodes=(node,)), pod({SGPU: "1"}, {"metax-tech.com/nouse-gpuuuid": "MX-1"}))
    assert decision.node is None
    reason = decision.alternatives[0].reason
    assert "unhealthy" in reason and "excluded by metax-tech.com/nouse-gpuuuid" in reason


@pytest.mark.parametrize(
    ("requests", "annotations", "field"),
    [
        ({SGPU: "1", "metax-tech.com/vcore": "150"}, {}, "metax-tech.com/vcore"),
        ({SGPU: "1"}, {QOS: "gold"}, QOS),
        ({SGPU: "2"}, {"metax-tech.com/sgpu-app-class": "online"}, "metax-tech.com/sgpu-app-class"),
        ({SGPU: "1"}, {"metax-tech.com/sgpu-app-class": "batch"}, "metax-tech.com/sgpu-app-class"),
        ({SGPU: "1"}, {TOPOLOGY_AWARE: "maybe"}, TOPOLOGY_AWARE),
        ({SGPU: "1", "metax-tech.com/vmemory": "1.5"}, {}, "metax-tech.com/vmemory"),
        ({"metax-tech.com/vcore": "50"}, {}, SGPU),
        ({SGPU: "1", GPU: "1"}, {}, GPU),
    ],
)
def test_malformed_requests_name_the_field(requests: dict[str, str], annotations: dict[str, str], field: str) -> None:
    with pytest.raises(RequestError) as caught:
        place(Snapshot(nodes=(built_node("mx-h", {0: 1}),)), pod(requests, annotations))
    assert caught.value.field == field


@pytest.mark.parametrize(("vmemory", "mib"), [("8", 8192), ("8Gi", 8192), ("8000Mi", 8000)])
def test_vmemory_is_gi_unless_a_unit_is_given(vmemory: str, mib: int) -> None:
    requests = {SGPU: "1", "metax-tech.com/vcore": "10", "metax-tech.com/vmemory": vmemory}
    decision = place(Snapshot(nodes=(built_node("mx-i", {0: 1}),)), pod(requests))
    assert decision.devices[0].memory_mib == mib


# --- application classes ------------------------------------------------------------------------------


def classed_node(*holders: tuple[int, str]) -> NodeState:
    allocations = tuple(
        Allocation(pod_uid=f"h-{n}", index=i, memory_mib=4096, cores=0 if c == "online" else 20, app_class=c)
        for n, (i, c) in enumerate(holders)
    )
    return NodeState(name="mx-k", machine_type="metax", devices=(card(0, 1), card(1, 1)), allocations=allocations)


def classed(app_class: str) -> PodRequest:
    requests = {SGPU: "1", "metax-tech.com/vcore": "10", "metax-tech.com/vmemory": "4"}
    return pod(requests, {"metax-tech.com/sgpu-app-class": app_class} if app_class else {})


def test_offline_pods_avoid_a_card_running_online_work() -> None:
    decision = place(Snapshot(nodes=(classed_node((0, "online"), (1, "")),)), classed("offline"))
    assert decision.node is None
    reason = decision.alternatives[0].reason
    assert "runs an online pod; offline pods are not sent to it" in reason
    assert "runs ordinary pods" in reason


def test_ordinary_pods_never_share_with_classed_pods() -> None:
    decision = place(Snapshot(nodes=(classed_node((0, "online"), (1, "offline")),)), classed(""))
    assert decision.node is None
    assert "runs online/offline pods; an ordinary pod needs another card" in decision.alternatives[0].reason


def test_online_pods_prefer_the_card_without_offline_only_work() -> None:
    decision = place(Snapshot(nodes=(classed_node((0, "offline"), (1, "online")),)), classed("online"))
    assert indices(decision) == {1}
    assert decision.score_parts["online_penalty"] == -20.0


def test_mutex_policy_needs_an_idle_card() -> None:
    node = NodeState(
        name="mx-m",
        machine_type="metax",
        devices=(card(0, 1),),
        allocations=(Allocation(pod_uid="h", index=0, memory_mib=4096, cores=10, qos="best-effort"),),
    )
    requests = {SGPU: "1", "metax-tech.com/vcore": "10", "metax-tech.com/vmemory": "4"}
    decision = place(Snapshot(nodes=(node,)), pod(requests, {GPU_POLICY: "mutex"}))
    assert "the mutex policy needs an idle card" in decision.alternatives[0].reason


@pytest.mark.parametrize(
    ("annotations", "requests", "pool"),
    [
        ({}, {SGPU: "1", "metax-tech.com/vcore": "50"}, ("best-effort", "")),  # HAMi's default pool
        ({QOS: "fixed-share"}, {SGPU: "1", "metax-tech.com/vcore": "50"}, ("fixed-share", "")),
        ({"metax-tech.com/sgpu-app-class": "online"}, {SGPU: "1"}, ("", "online")),  # online pods have no pool
    ],
)
def test_the_decision_carries_the_pool_its_allocations_join(
    annotations: dict[str, str], requests: dict[str, str], pool: tuple[str, str]
) -> None:
    decision = place(Snapshot(nodes=(fixture_node(),)), PodRequest(uid="p", requests=requests, annotations=annotations))
    assert decision.node == "mx-a"
    assert (decision.qos, decision.app_class) == pool


def test_nvidia_decisions_join_no_pool() -> None:
    topology = load_topology("dgx-h100", node="g")
    node = NodeState(name="g", machine_type=topology.machine_type, devices=topology.devices, links=topology.links)
    decision = place(Snapshot(nodes=(node,)), PodRequest(uid="p", requests={"nvidia.com/gpu": "1"}))
    assert decision.node == "g" and (decision.qos, decision.app_class) == ("", "")
