"""NVIDIA placement scenarios: filters, sharing, policies, topology, HAMi's ties, remainder protection.

Each expectation is derived in the comment next to it from the rules in docs/engine.md.
"""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import fixture_node, gpu, indices, matrix_links, node, place, pod, snapshot

from engine import Allocation, Engine, Limits, Mode
from schemas.topology import PcieLevel

SYS, NODE, PIX = PcieLevel.SYS, PcieLevel.NODE, PcieLevel.PIX


def four_gpu_box(name: str = "n1", **kwargs: object):
    """0-1 PIX, 2-3 PIX, the rest SYS: two equal pairs."""
    levels = {(0, 1): PIX, (2, 3): PIX, (0, 2): SYS, (0, 3): SYS, (1, 2): SYS, (1, 3): SYS}
    return node(name, [gpu(i) for i in range(4)], matrix_links({p: (0, lv) for p, lv in levels.items()}), **kwargs)  # type: ignore[arg-type]


# --- topology-aware choice and HAMi's tie rule --------------------------------------------------


def test_equal_pairs_default_takes_the_earliest_hami_walks_from_the_end() -> None:
    # (0,1) and (2,3) both score 50 and cut 40 from the rest: default -> earliest (0,1).
    # HAMi: all GPUs score alike, stable order 0..3, walked from the end: 3,2,1,0; the first
    # combination with the top score in that order is (3,2).
    snap = snapshot(four_gpu_box())
    request = pod(2, policy="topology-aware")
    assert indices(place(snap, request).devices) == [0, 1]
    assert indices(place(snap, request, Mode.HAMI).devices) == [3, 2]


def test_single_gpu_takes_the_worst_connected_one() -> None:
    # 0-1 NV2 (200); 2-3 PIX (50); others SYS (10). Totals to the other candidates:
    # 0,1: 220; 2,3: 70. HAMi: first strictly lowest in walk order 3,2,1,0 -> 3.
    # Default: lowest cut of the idle topology (same totals here), tie -> earliest -> 2.
    links = matrix_links({(0, 1): (2, None), (2, 3): (0, PIX), (0, 2): (0, SYS), (0, 3): (0, SYS),
                          (1, 2): (0, SYS), (1, 3): (0, SYS)})  # fmt: skip
    snap = snapshot(node("n1", [gpu(i) for i in range(4)], links))
    assert indices(place(snap, pod(1, policy="topology-aware"), Mode.HAMI).devices) == [3]
    assert indices(place(snap, pod(1, policy="topology-aware")).devices) == [2]


def test_multi_gpu_takes_the_highest_pair_score_sum() -> None:
    # pcie-8gpu-2socket: PIX pairs (0,1),(2,3),(4,5),(6,7); PHB inside a socket; SYS across.
    # 4 GPUs: one socket = 2*50 + 4*30 = 220, the best; socket 0 is earliest.
    decision = place(snapshot(fixture_node("n1", "pcie-8gpu-2socket")), pod(4, policy="topology-aware"))
    assert indices(decision.devices) == [0, 1, 2, 3]
    assert decision.score_parts["set_score"] == 220


def test_dgx1_two_gpus_do_not_break_an_intact_clique() -> None:
    # DGX-1 with GPU 1 busy: quad 4-7 is a full NVLink clique, quad 0,2,3 is not.
    # NV2 pairs free: (0,3) (2,3) (4,7) (5,6) (6,7) on one NUMA node (200 + NODE 20), (0,4) across (200 + SYS 10).
    # Cut to the other idle GPUs: (2,3) 620, the least; (6,7) and (4,7) break the clique.
    # HAMi walks 7,6,5,4,3,2,0 and takes the first 200 pair: (7,6), breaking it.
    snap = snapshot(fixture_node("n1", "dgx1-v100", busy=[1]))
    request = pod(2, policy="topology-aware")
    default = place(snap, request)
    hami = place(snap, request, Mode.HAMI)
    assert indices(default.devices) == [2, 3]
    assert indices(hami.devices) == [7, 6]
    # never a lower internal score than the optimum
    assert default.score_parts["set_score"] == hami.score_parts["set_score"] == 220
    assert default.score_parts["remainder_loss"] == 620


def test_dgx_h100_any_pair_is_nv18_and_a_pair_stays_on_one_socket() -> None:
    decision = place(snapshot(fixture_node("n1", "dgx-h100")), pod(2, policy="topology-aware"))
    assert decision.score_parts["set_score"] == 1800 + 20  # NV18 plus NODE: one NUMA node


def test_of_equally_linked_gpus_the_set_on_one_socket_is_chosen() -> None:
    # dgx-h100: GPUs 0-3 on NUMA node 0, 4-7 on 1, every pair NV18. Free 3,4,5,6: 3 is alone on its socket.
    node = fixture_node("n1", "dgx-h100", busy=[0, 1, 2, 7])
    decision = place(snapshot(node), pod(2, policy="topology-aware"))
    assert indices(decision.devices) in ([4, 5], [4, 6], [5, 6])
    assert {node.devices[i].numa_node for i in indices(decision.devices)} == {1}


# --- filters ---------------------------------------------------------------------------------------


def test_unhealthy_gpus_are_skipped_and_named() -> None:
    devices = [gpu(0, healthy=False), gpu(1), gpu(2), gpu(3)]
    snap = snapshot(node("n1", devices))
    assert indices(place(snap, pod(3)).devices) == [1, 2, 3]
    decision = place(snap, pod(4))
    assert decision.node is None
    assert decision.alternatives[0].reason == "3 of 4 GPUs free, 4 requested: GPU-0000 unhealthy"


def test_use_gpuuuid_keeps_only_the_listed_gpus() -> None:
    snap = snapshot(node("n1", [gpu(i) for i in range(4)]))
    decision = place(snap, pod(2, annotations={"nvidia.com/use-gpuuuid": "GPU-0001,GPU-0003"}))
    assert indices(decision.devices) == [1, 3]


def test_nouse_gpuuuid_excludes_and_explains() -> None:
    snap = snapshot(node("n1", [gpu(i) for i in range(2)]))
    decision = place(snap, pod(2, annotations={"nvidia.com/nouse-gpuuuid": "GPU-0001"}))
    assert decision.node is None
    assert decision.alternatives[0].reason == (
        "1 of 2 GPUs free, 2 requested: GPU-0001 excluded by nvidia.com/nouse-gpuuuid"
    )


def test_gpu_type_filters_match_the_model_case_insensitively() -> None:
    devices = [gpu(0, model="NVIDIA A100-SXM4-80GB"), gpu(1, model="NVIDIA H100 80GB HBM3")]
    snap = snapshot(node("n1", devices))
    assert indices(place(snap, pod(1, annotations={"nvidia.com/use-gputype": "h100"})).devices) == [1]
    assert indices(place(snap, pod(1, annotations={"nvidia.com/nouse-gputype": "H100"})).devices) == [0]


# --- sharing -----------------------------------------------------------------------------------------


def shared_gpu(*allocations: Allocation):
    return snapshot(node("n1", [gpu(0, memory=81920)], allocations=allocations))


def test_a_share_fits_while_memory_and_cores_last() -> None:
    snap = shared_gpu(Allocation(pod_uid="a", index=0, memory_mib=60000, cores=50))
    decision = place(snap, pod(1, gpumem="20000", gpucores="50"))
    assert decision.node == "n1"
    assert (decision.devices[0].memory_mib, decision.devices[0].cores) == (20000, 50)
    # 81920 - 60000 = 21920 MiB and 50 % cores are left
    assert (
        place(snap, pod(1, gpumem="30000"))
        .alternatives[0]
        .reason.endswith("GPU-0000 21920 MiB free, 30000 MiB requested")
    )
    assert (
        place(snap, pod(1, gpumem="1000", gpucores="60"))
        .alternatives[0]
        .reason.endswith("GPU-0000 50% cores free, 60% requested")
    )


def test_a_whole_gpu_request_needs_an_idle_gpu() -> None:
    snap = shared_gpu(Allocation(pod_uid="a", index=0, memory_mib=1000, cores=10))
    decision = place(snap, pod(1))
    assert decision.node is None
    assert "in use by 1 pod(s); whole-GPU request needs an idle GPU" in decision.alternatives[0].reason


def test_whole_gpu_assignment_is_memory_zero_cores_100() -> None:
    decision = place(snapshot(node("n1", [gpu(0)])), pod(1))
    assert (decision.devices[0].memory_mib, decision.devices[0].cores, decision.devices[0].uuid) == (0, 100, "GPU-0000")


def test_memory_percentage_is_of_the_gpu_memory() -> None:
    decision = place(shared_gpu(), pod(1, gpumem_percentage="50"))
    assert decision.devices[0].memory_mib == 40960


def test_a_gpu_holds_at_most_ten_pods() -> None:
    allocations = [Allocation(pod_uid=f"p{i}", index=0, memory_mib=1000, cores=0) for i in range(10)]
    decision = place(shared_gpu(*allocations), pod(1, gpumem="1000", gpucores="0"))
    assert decision.node is None
    assert "already shared by 10 pods (at most 10)" in decision.alternatives[0].reason


def test_mutex_policy_takes_only_idle_gpus_even_for_a_share() -> None:
    share = Allocation(pod_uid="a", index=0, memory_mib=1000, cores=10)
    snap = snapshot(node("n1", [gpu(0), gpu(1)], allocations=[share]))
    assert indices(place(snap, pod(1, gpumem="1000", policy="mutex")).devices) == [1]


@pytest.mark.parametrize(("policy", "mode", "expected"), [
    ("binpack", Mode.DEFAULT, 0), ("spread", Mode.DEFAULT, 1),
    ("binpack", Mode.HAMI, 0), ("spread", Mode.HAMI, 1),
])  # fmt: skip
def test_gpu_policy_orders_shares(policy: str, mode: Mode, expected: int) -> None:
    # GPU 0 already holds a share: binpack fills it, spread takes the empty GPU 1.
    # HAMi: binpack sorts score ascending [1, 0] and walks from the end -> 0;
    # spread sorts descending [0, 1] -> 1.
    share = Allocation(pod_uid="a", index=0, memory_mib=1000, cores=10)
    snap = snapshot(node("n1", [gpu(0), gpu(1)], allocations=[share]))
    assert indices(place(snap, pod(1, gpumem="1000", gpucores="10", policy=policy), mode).devices) == [expected]


# --- NUMA ----------------------------------------------------------------------------------------------


def numa_box():
    # NUMA 0: GPUs 0, 1 (0 busy); NUMA 1: GPUs 2, 3. (1,2) PIX 50, (2,3) NODE 20, others SYS.
    links = matrix_links({(0, 1): (0, NODE), (1, 2): (0, PIX), (2, 3): (0, NODE), (0, 2): (0, SYS),
                          (0, 3): (0, SYS), (1, 3): (0, SYS)})  # fmt: skip
    return snapshot(node("n1", [gpu(0, numa=0), gpu(1, numa=0), gpu(2, numa=1), gpu(3, numa=1)], links, busy=[0]))


def test_without_numa_binding_the_best_pair_crosses_numa() -> None:
    assert indices(place(numa_box(), pod(2, policy="topology-aware")).devices) == [1, 2]


@pytest.mark.parametrize("request_", [
    pod(2, policy="topology-aware", annotations={"nvidia.com/numa-bind": "true"}),
    pod(2, policy="topology-aware,numa"),
])  # fmt: skip
def test_numa_binding_keeps_the_set_on_one_numa_node(request_) -> None:
    assert indices(place(numa_box(), request_).devices) == [2, 3]


def test_numa_binding_in_hami_mode_takes_the_first_numa_run_of_the_walk() -> None:
    # spread order: NUMA 0 [0 (busy, higher score), 1], NUMA 1 [2, 3]; walk 3, 2, ... -> [3, 2]
    decision = place(numa_box(), pod(2, annotations={"nvidia.com/numa-bind": "true"}), Mode.HAMI)
    assert indices(decision.devices) == [3, 2]


def test_numa_binding_that_cannot_fit_explains_per_numa_node() -> None:
    decision = place(numa_box(), pod(3, policy="numa"))
    assert decision.node is None
    assert decision.alternatives[0].reason == (
        "no NUMA node has 3 usable GPUs (NUMA 0: 1, NUMA 1: 2) and nvidia.com/numa-bind is set"
    )


# --- missing data, work bound ---------------------------------------------------------------------------


def test_no_link_data_still_places_with_score_zero() -> None:
    decision = place(snapshot(node("n1", [gpu(i) for i in range(4)])), pod(2, policy="topology-aware"))
    assert indices(decision.devices) == [0, 1]
    assert decision.score_parts["set_score"] == 0


def test_search_cap_marks_the_decision_inexact() -> None:
    from engine_builders import dgx1_boards

    capped = Engine(limits=Limits(search_cap=5))
    decision = capped.place(snapshot(dgx1_boards(4, name="big")), pod(8, policy="topology-aware"))
    assert decision.node == "big"
    assert len(decision.devices) == 8
    assert decision.score_parts["exact"] == 0.0
    assert any("search bound hit" in w for w in decision.warnings)


def test_numa_binding_unschedulable_in_both_modes() -> None:
    # Busy 0 and 2: one usable GPU per NUMA node. HAMi's walk (3, 2, 1, 0) restarts at NUMA 0
    # and ends holding only GPU 1.
    links = matrix_links({(a, b): (0, SYS) for a in range(4) for b in range(a + 1, 4)})
    devices = [gpu(0, numa=0), gpu(1, numa=0), gpu(2, numa=1), gpu(3, numa=1)]
    snap = snapshot(node("n1", devices, links, busy=[0, 2]))
    request = pod(2, annotations={"nvidia.com/numa-bind": "true"})
    default = place(snap, request)
    assert default.node is None
    assert default.alternatives[0].reason.startswith("no NUMA node has 2 usable GPUs (NUMA 0: 1, NUMA 1: 1)")
    hami = place(snap, request, Mode.HAMI)
    assert hami.node is None
    assert hami.alternatives[0].reason == "HAMi's walk found 1 usable GPU on one NUMA node, 2 requested"


def test_nodes_wired_alike_on_other_numa_nodes_do_not_share_their_pair_scores() -> None:
    # On the DGX H100 print, an NVSwitch pair has no PCIe path: its NUMA nodes break the tie. A node
    # wired alike whose GPUs 3 and 4 share a NUMA node (and 5, 6 do not) must pair 3 with 4, even in an
    # engine that already scored the first node's wiring.
    first = fixture_node("a", "dgx-h100", busy=[0, 1, 2, 7])
    regrouped = tuple(msgspec.structs.replace(d, numa_node=0 if d.index <= 4 else 1) for d in first.devices)
    second = msgspec.structs.replace(fixture_node("b", "dgx-h100", busy=[0, 1, 2, 7]), devices=regrouped)
    engine = Engine()
    assert indices(engine.place(snapshot(first), pod(2, policy="topology-aware")).devices) == [4, 5]
    shared = engine.place(snapshot(second), pod(2, policy="topology-aware"))
    fresh = Engine().place(snapshot(second), pod(2, policy="topology-aware"))
    assert indices(shared.devices) == indices(fresh.devices) == [3, 4]
