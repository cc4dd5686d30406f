"""The shared node loop: node filters, ranking under the node policy, explanations, determinism."""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import gpu, indices, matrix_links, node, place, pod, snapshot

from engine import Decision, Mode
from engine.decide.kube.messages import fit_error_message
from schemas.topology import PcieLevel

SYS, PIX = PcieLevel.SYS, PcieLevel.PIX


def box(name: str, pairs: dict[tuple[int, int], PcieLevel], busy: list[int] = [], **kwargs: object):  # noqa: B006
    levels = {(a, b): SYS for a in range(4) for b in range(a + 1, 4)}
    levels.update(pairs)
    links = matrix_links({p: (0, lv) for p, lv in levels.items()})
    return node(name, [gpu(i) for i in range(4)], links, busy=busy, **kwargs)  # type: ignore[arg-type]


TWO_PIX = {(0, 1): PIX, (2, 3): PIX}


def test_cordoned_and_not_ready_nodes_are_skipped_with_their_reason() -> None:
    snap = snapshot(
        box("a-cordoned", TWO_PIX, unschedulable=True),
        box("b-not-ready", TWO_PIX, ready=False),
        box("c-ok", TWO_PIX),
    )
    decision = place(snap, pod(2))
    assert decision.node == "c-ok"
    reasons = {v.node: (v.fits, v.reason) for v in decision.alternatives}
    assert reasons == {"a-cordoned": (False, "cordoned"), "b-not-ready": (False, "not ready")}


def test_nodes_without_nvidia_gpus_cannot_host() -> None:
    decision = place(snapshot(node("cpu-only", [])), pod(1))
    assert decision.node is None
    assert decision.alternatives[0].reason == "no GPU devices"
    assert decision.reason == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_unschedulable_counts_reasons_like_kube_scheduler() -> None:
    snap = snapshot(
        box("a", TWO_PIX, unschedulable=True),
        box("b", TWO_PIX, ready=False),
        box("c", TWO_PIX, busy=[0, 1, 2]),
    )
    decision = place(snap, pod(2))
    assert decision.node is None
    assert decision.reason == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were not ready, "
        "1 node(s) were unschedulable."
    )
    by_node = {v.node: v.reason for v in decision.alternatives}
    assert by_node["c"].startswith("1 of 4 GPUs free, 2 requested: ")
    assert "in use by 1 pod(s)" in by_node["c"]


def test_summary_orders_as_kube_scheduler_does_by_text() -> None:
    # kube-scheduler sorts "<count> <reason>" as strings: "10 ..." before "6 ..."
    summaries = ["node(s) were unschedulable"] * 6 + ["Insufficient nvidia.com/gpu"] * 10
    assert fit_error_message(16, summaries) == (
        "0/16 nodes are available: 10 Insufficient nvidia.com/gpu, 6 node(s) were unschedulable."
    )


@pytest.mark.parametrize(("node_policy", "winner"), [("binpack", "a-fuller"), ("spread", "b-empty")])
def test_node_policy_decides_between_equal_links(node_policy: str, winner: str) -> None:
    # Both give a PIX pair (link 50). a: GPUs 0,1 busy, takes 2,3 -> full, nothing idle left to break.
    # b: empty, takes 0,1 -> half full, cuts 40 of its 140 idle link score.
    # binpack: a = 50 + 20*1.0 + 0 = 70 > b = 50 + 20*0.5 - 10*40/140 = 57.1
    # spread:  a = 50 + 0 + 0 = 50 < b = 50 + 10 - 2.86 = 57.1
    snap = snapshot(box("a-fuller", TWO_PIX, busy=[0, 1]), box("b-empty", TWO_PIX))
    decision = place(snap, pod(2, policy="topology-aware", node_policy=node_policy))
    assert decision.node == winner
    loser = decision.alternatives[0]
    assert loser.fits
    assert loser.score < decision.score
    assert "fill" in loser.reason


def test_link_quality_outweighs_packing() -> None:
    # a: fuller but only a SYS pair left (link 10): 10 + 20 = 30.
    # b: empty with a PIX pair (link 50): 50 + 10 - 10*40/140 = 57.1 -> b even under binpack.
    # HAMi's node score ignores links: binpack takes the fuller node a.
    snap = snapshot(box("a", {(0, 1): PIX}, busy=[0, 1]), box("b", TWO_PIX))
    request = pod(2, policy="topology-aware", node_policy="binpack")
    decision = place(snap, request)
    assert decision.node == "b"
    assert "link 10 vs 50" in decision.alternatives[0].reason
    assert place(snap, request, Mode.HAMI).node == "a"


def test_equal_nodes_tie_by_name() -> None:
    snap = snapshot(box("n2", TWO_PIX), box("n1", TWO_PIX), box("n3", TWO_PIX))
    decision = place(snap, pod(2))
    assert decision.node == "n1"
    assert [v.node for v in decision.alternatives] == ["n2", "n3"]
    assert decision.alternatives[0].reason.startswith("tied with n1 at 57.14")
    assert decision.alternatives[0].reason.endswith("; n1 sorts first by name")


def test_alternatives_list_fitting_nodes_best_first_then_the_rest() -> None:
    snap = snapshot(
        box("a", {}, unschedulable=True),
        box("b", {(0, 1): PIX}),  # one PIX pair: 50 + 10 - 10*40/90 = 55.6
        box("c", TWO_PIX),  # 57.1
        box("d", {}),  # SYS only: 10 + 10 - 10*40/60 = 13.3
    )
    decision = place(snap, pod(2, policy="topology-aware"))
    assert decision.node == "c"
    assert [(v.node, v.fits) for v in decision.alternatives] == [("b", True), ("d", True), ("a", False)]


def test_same_input_in_any_order_gives_the_same_decision() -> None:
    nodes = [box(name, TWO_PIX, busy=busy) for name, busy in [("x", [0]), ("y", []), ("z", [3])]]
    request = pod(1, policy="topology-aware")
    first = place(snapshot(*nodes), request)
    again = place(snapshot(*reversed(nodes)), request)
    assert msgspec.json.encode(first) == msgspec.json.encode(again)


def test_duplicate_node_names_are_rejected() -> None:
    from engine import RequestError

    with pytest.raises(RequestError) as caught:
        place(snapshot(box("a", {}), box("a", {})), pod(1))
    assert caught.value.field == "snapshot.nodes"


def test_decision_roundtrips_as_json() -> None:
    decision = place(snapshot(box("a", TWO_PIX)), pod(2))
    assert msgspec.json.decode(msgspec.json.encode(decision), type=Decision) == decision
    assert indices(decision.devices) == [0, 1]


def test_summary_names_what_the_devices_lack_when_a_node_has_enough_of_them() -> None:
    # 4 idle 80 GiB GPUs: more memory per device than any has is a memory shortage, not a GPU shortage.
    decision = place(snapshot(box("m", TWO_PIX)), pod(1, gpumem="200000"))
    assert decision.reason == "0/1 nodes are available: 1 Insufficient nvidia.com/gpumem."
    held = box("c", TWO_PIX, busy=[0, 1, 2, 3]).allocations
    half = [msgspec.structs.replace(a, cores=60, memory_mib=1000) for a in held]
    cores_taken = msgspec.structs.replace(box("c", TWO_PIX), allocations=tuple(half))
    decision = place(snapshot(cores_taken), pod(1, gpucores="50", gpumem="1000"))
    assert decision.reason == "0/1 nodes are available: 1 Insufficient nvidia.com/gpucores."


def test_summary_is_the_device_resource_when_the_node_has_too_few_devices() -> None:
    decision = place(snapshot(box("small", TWO_PIX)), pod(8))
    assert decision.reason == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
