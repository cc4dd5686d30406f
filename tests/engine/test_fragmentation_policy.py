"""The fragmentation node policy (FGD): the measure, the node it picks, the GPU, fallbacks, ties.

Expectations are worked out by hand from the definition in
engine/fragmentation.py: for each class, a device's free share
counts as fragment when the class cannot use it (or all free share when the
class cannot run on the node at all: no GPU, too little CPU); classes are
weighted by popularity. A node scores FGD's integer level of the change,
trunc(100 / (1 + e^(delta / 1000))), plus a tie term below 1: a GPU pod's
(busy + by_cpu) / 2 * 0.98, by_cpu 0.5 when CPU is not weighed.
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from engine_builders import gpu, node, place, pod

from bench.cluster import ClusterState, Placement
from bench.fragmentation import PodClass
from bench.topoplace_trace import EngineTracePolicy, engine_workload
from bench.trace import NodeRow, PodRow
from engine import Allocation, Mode, NodeState, PodRequest, RequestError, Snapshot
from engine.core.model import PlaceInput, WorkloadClass
from engine.node.fragmentation import (
    FreeShare,
    NodeCpu,
    PodShape,
    class_fragment,
    fragmentation,
    heavy_ratio,
    level,
    tie,
)

MEMORY = 81920  # the test GPU's memory (MiB)
WHOLE = WorkloadClass(gpus=1, milli=1000, weight=0.5)
HALF = WorkloadClass(gpus=1, milli=500, weight=0.5)
WORKLOAD = (WHOLE, HALF)
FRAG = "fragmentation"


def used(index: int, milli: int, uid: str = "holder") -> Allocation:
    """A share of `milli` thousandths of GPU `index`, memory and cores alike."""
    return Allocation(pod_uid=f"{uid}-{index}", index=index, memory_mib=MEMORY * milli // 1000, cores=milli // 10)


def gpus_node(name: str, n: int, allocations: tuple[Allocation, ...] = ()) -> NodeState:
    return node(name, [gpu(i) for i in range(n)], allocations=allocations)


def share_pod(milli: int, node_policy: str | None = FRAG, **kwargs: str) -> PodRequest:
    return pod(1, gpumem=str(MEMORY * milli // 1000), gpucores=str(milli // 10), node_policy=node_policy, **kwargs)


def with_cpu(state: NodeState, cores: int) -> NodeState:
    allocatable = {"cpu": str(cores), "pods": "110", "nvidia.com/gpu": str(10 * len(state.devices))}
    return msgspec.structs.replace(state, allocatable=allocatable, requested={"cpu": "0"})


def cpu_pod(cpu: str, gpus: int = 0, node_policy: str = FRAG) -> PodRequest:
    requests = {"cpu": cpu} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    return PodRequest(uid="c", requests=requests, annotations={"hami.io/node-scheduler-policy": node_policy})


# The tie term of a GPU pod on an idle node and on a busy one, CPU not weighed.
IDLE_TIE = (0 + 0.5) / 2 * 0.98
BUSY_TIE = (1 + 0.5) / 2 * 0.98


def free(milli: int, *, idle: bool | None = None, model: str = "") -> FreeShare:
    return FreeShare(milli=milli, idle=milli == 1000 if idle is None else idle, model=model)


# --- the measure ----------------------------------------------------------------------------


def test_a_usable_class_counts_only_the_devices_it_cannot_use() -> None:
    devices = [free(500), free(1000)]
    assert class_fragment(devices, WHOLE) == 500  # the idle GPU serves it; the half-free one is fragment
    assert class_fragment(devices, HALF) == 0  # both can take half a GPU
    assert fragmentation(devices, WORKLOAD) == pytest.approx(0.5 * 500 + 0.5 * 0)


def test_a_class_that_cannot_run_counts_all_free_share() -> None:
    two_gpu = WorkloadClass(gpus=2, milli=1000)
    assert class_fragment([free(1000), free(300)], two_gpu) == 1300  # only one idle GPU: nothing usable
    assert class_fragment([free(300), free(0)], HALF) == 300


def test_a_busy_gpu_with_full_free_share_does_not_serve_a_whole_gpu_class() -> None:
    assert class_fragment([free(1000, idle=False)], WHOLE) == 1000


def test_models_the_class_does_not_accept_are_fragment() -> None:
    t4_only = WorkloadClass(gpus=1, milli=500, models=("t4",))
    assert class_fragment([free(1000, model="Tesla T4"), free(800, model="A10")], t4_only) == 800
    assert class_fragment([free(800, model="A10")], t4_only) == 800


def test_weights_count_by_ratio_and_no_workload_means_no_fragment() -> None:
    devices = [free(500), free(1000)]
    doubled = tuple(msgspec.structs.replace(c, weight=c.weight * 4) for c in WORKLOAD)
    assert fragmentation(devices, doubled) == fragmentation(devices, WORKLOAD)
    assert fragmentation(devices, ()) == 0.0


def test_a_class_that_lacks_cpu_cannot_run_and_a_cpu_only_class_never_uses_a_gpu() -> None:
    needs_4_cores = WorkloadClass(gpus=1, milli=500, cpu_milli=4000)
    devices = [free(1000), free(300)]
    assert class_fragment(devices, needs_4_cores, cpu_free=4000) == 300  # fits: only GPU 1 is fragment
    assert class_fragment(devices, needs_4_cores, cpu_free=3999) == 1300  # one milli-CPU short: all of it
    assert class_fragment(devices, needs_4_cores) == 300  # CPU not known: never the reason
    assert class_fragment(devices, WorkloadClass(gpus=0, cpu_milli=1000), cpu_free=10**6) == 1300


@pytest.mark.parametrize(("delta", "expected"), [(0.0, 50), (-250.0, 56), (250.0, 43), (1000.0, 26), (10**6, 0)])
def test_the_level_is_fgds_integer_score_of_the_change(delta: float, expected: int) -> None:
    assert level(delta) == expected


def test_levels_never_rise_with_the_delta_and_stay_in_range() -> None:
    deltas = [-5000.0 + 7.3 * i for i in range(1400)]
    levels = [level(d) for d in deltas]
    assert all(0 <= v <= 100 for v in levels)
    assert all(a >= b for a, b in zip(levels, levels[1:], strict=False))
    assert len(set(levels)) < len(deltas) / 10  # coarse: many deltas share a level


def test_the_heavy_ratio_is_the_workloads_weighted_median_cpu_per_gpu() -> None:
    workload = (
        WorkloadClass(gpus=1, cpu_milli=2000, weight=0.3),  # 2000 per GPU
        WorkloadClass(gpus=2, cpu_milli=8000, weight=0.5),  # 4000 per GPU: the median by weight
        WorkloadClass(gpus=1, milli=250, cpu_milli=4000, weight=0.2),  # 16000 per whole GPU
        WorkloadClass(gpus=0, cpu_milli=64000, weight=5.0),  # CPU-only: no GPU to divide by
    )
    assert heavy_ratio(workload) == 4000
    assert heavy_ratio((WorkloadClass(gpus=1),)) is None


def test_the_tie_term_sends_cpu_heavy_pods_to_spare_cpu_and_light_ones_away_from_it() -> None:
    rich, lean = NodeCpu(allocatable=64000, free=64000), NodeCpu(allocatable=16000, free=16000)
    heavy, light = PodShape(cpu_milli=8000, gpu_milli=1000), PodShape(cpu_milli=500, gpu_milli=1000)

    def on(cpu: NodeCpu, pod: PodShape) -> float:
        return tie(pod, cpu, gpus=4, gpu_free_after=2000, busy=True, heavy=1000.0)

    assert on(rich, heavy) > on(lean, heavy)
    assert on(rich, light) < on(lean, light)
    for value in (on(rich, heavy), on(lean, heavy), on(rich, light), on(lean, light)):
        assert 0.49 <= value < 0.98  # below one level, busy nodes in the upper half
    assert tie(heavy, None, 4, 2000, busy=False, heavy=None) == pytest.approx(IDLE_TIE)


@pytest.mark.parametrize(
    ("field", "value"), [("gpus", -1), ("milli", 0), ("milli", 1001), ("weight", 0.0), ("cpu_milli", -1)]
)  # fmt: skip
def test_bad_workload_classes_are_refused_at_decode_naming_the_field(field: str, value: float) -> None:
    raw = {"snapshot": {"nodes": [], "workload": [{"gpus": 1, "milli": 500, "weight": 1.0, field: value}]},
           "request": {"uid": "p"}}  # fmt: skip
    with pytest.raises(msgspec.ValidationError, match=field):
        msgspec.convert(raw, PlaceInput)


# --- the node it picks ----------------------------------------------------------------------


def test_a_share_goes_where_it_fills_a_half_used_gpu_not_where_it_breaks_an_idle_one() -> None:
    # a: two idle GPUs. F before 0; a half share on one idle GPU leaves [500, 1000]:
    #    whole class: 500 is fragment; half class: none -> F after 0.5 * 500 = 250, delta +250.
    # b: GPU 1 half used. F before: whole class 0.5 * 500 = 250; the share fills GPU 1 -> [1000, 0],
    #    F after 0, delta -250. Levels 43 and 56: b wins although a sorts first.
    snap = Snapshot(nodes=(gpus_node("a", 2), gpus_node("b", 2, (used(1, 500),))), workload=WORKLOAD)
    decision = place(snap, share_pod(500))
    assert decision.node == "b"
    assert [d.index for d in decision.devices] == [1]
    assert decision.score_parts["frag_delta"] == pytest.approx(-250.0)
    assert decision.score_parts["frag_level"] == 56
    assert decision.score == pytest.approx(56 + BUSY_TIE)
    loser = decision.alternatives[0]
    assert loser.node == "a"
    assert loser.score == pytest.approx(43 + IDLE_TIE)
    assert "frag_level 43 vs 56" in loser.reason


def test_fragmentation_and_binpack_disagree_where_packing_breaks_the_last_idle_gpu() -> None:
    # a: 4 GPUs, 0-2 whole-used, 3 idle: the fuller node, binpack's choice. The share breaks the
    #    last idle GPU: whole class can no longer run -> all 500 free is fragment, delta +250.
    # b: 2 GPUs, GPU 0 half used: the share fills it, delta -250 (as above).
    a = node("a", [gpu(i) for i in range(4)], busy=(0, 1, 2))
    b = gpus_node("b", 2, (used(0, 500),))
    snap = Snapshot(nodes=(a, b), workload=WORKLOAD)
    assert place(snap, share_pod(500, node_policy="binpack")).node == "a"
    decision = place(snap, share_pod(500))
    assert decision.node == "b"
    assert decision.score_parts["frag_delta"] == pytest.approx(-250.0)
    assert decision.alternatives[0].score == pytest.approx(43 + BUSY_TIE)


def test_whole_gpu_pods_go_where_no_idle_gpu_is_left_half_broken() -> None:
    # Classes {1 whole GPU, 2 whole GPUs}, equally likely; a 1-GPU whole pod.
    # a: 2 idle GPUs -> 1 idle after: the 2-GPU class cannot run, its fragment is 1000: delta +500, level 37.
    # b: 3 idle GPUs -> 2 idle after: both classes still run, delta 0, level 50.
    workload = (WorkloadClass(gpus=1, weight=1.0), WorkloadClass(gpus=2, weight=1.0))
    snap = Snapshot(nodes=(gpus_node("a", 2), gpus_node("b", 3)), workload=workload)
    decision = place(snap, pod(1, node_policy=FRAG))
    assert decision.node == "b"
    assert decision.score_parts["frag_delta"] == 0.0
    assert decision.alternatives[0].score == pytest.approx(37 + IDLE_TIE)


def test_within_a_node_the_share_takes_the_gpu_that_fragments_least() -> None:
    # GPUs free [1000, 500, 250], classes {whole, half}, a quarter share.
    #   F before: whole (GPU 0 serves it) 500 + 250 = 750; half (GPUs 0, 1) 250 -> F = 500.
    #   on GPU 0 -> [750, 500, 250], no idle GPU: whole 1500; half 250 -> F 875, +375
    #   on GPU 1 -> [1000, 250, 250]: whole 500; half 500 -> F 500, 0
    #   on GPU 2 -> [1000, 500, 0]: whole 500; half 0 -> F 250, -250  <- chosen
    # (spread, the default GPU policy, would take the emptiest GPU 0.)
    n = gpus_node("n", 3, (used(1, 500), used(2, 750)))
    snap = Snapshot(nodes=(n,), workload=WORKLOAD)
    assert [d.index for d in place(snap, share_pod(250, node_policy="binpack")).devices] == [0]
    decision = place(snap, share_pod(250))
    assert [d.index for d in decision.devices] == [2]
    assert decision.score_parts["frag_delta"] == pytest.approx(-250.0)


def test_on_one_level_a_gpu_pod_goes_to_a_node_already_in_use_before_an_idle_one() -> None:
    # One class, 1 whole GPU. a: 4 idle; b: GPUs 0-1 taken, 2-3 idle. Taking an idle GPU leaves no free
    # share the class cannot use on either: delta 0, level 50 both. b is in use, a is idle: b wins
    # although a sorts first (a whole idle node stays whole for the pods that need one).
    snap = Snapshot(
        nodes=(gpus_node("a", 4), node("b", [gpu(i) for i in range(4)], busy=(0, 1))),
        workload=(WorkloadClass(gpus=1),),
    )
    decision = place(snap, pod(1, node_policy=FRAG))
    assert decision.node == "b"
    assert decision.score_parts["frag_delta"] == 0.0
    assert decision.score == pytest.approx(50 + BUSY_TIE)
    assert decision.alternatives[0].score == pytest.approx(50 + IDLE_TIE)
    assert "tie" in decision.alternatives[0].reason


def test_the_tie_term_never_outweighs_a_level() -> None:
    # Classes {1 whole GPU, 2 whole GPUs}, a whole 1-GPU pod. a: idle, 3 GPUs: 2 idle left, delta 0,
    # level 50. b: in use (GPU 0), 2 idle: 1 idle left, the 2-GPU class loses its pair, delta +500,
    # level 37. b's busy tie term does not lift it past a.
    workload = (WorkloadClass(gpus=1, weight=1.0), WorkloadClass(gpus=2, weight=1.0))
    b = node("b", [gpu(i) for i in range(3)], busy=(0,))
    decision = place(Snapshot(nodes=(gpus_node("a", 3), b), workload=workload), pod(1, node_policy=FRAG))
    assert decision.node == "a"
    assert decision.score == pytest.approx(50 + IDLE_TIE)
    assert decision.alternatives[0].score == pytest.approx(37 + BUSY_TIE)


def test_identical_nodes_go_to_the_name_that_sorts_first_whatever_the_listing_order() -> None:
    nodes = (gpus_node("b", 2), gpus_node("a", 2), gpus_node("c", 2))
    decisions = [
        place(Snapshot(nodes=order, workload=WORKLOAD), share_pod(500))
        for order in (nodes, nodes[::-1], (nodes[2], nodes[0], nodes[1]))
    ]
    assert all(d == decisions[0] for d in decisions)
    assert decisions[0].node == "a"
    assert [v.node for v in decisions[0].alternatives] == ["b", "c"]
    assert decisions[0].alternatives[0].reason.startswith("tied with a")


def test_equal_fragmentation_within_a_node_keeps_the_gpu_policy_order() -> None:
    # Two idle GPUs: either one gives the same F; binpack's order and spread's order both start at GPU 0
    # among idle GPUs of equal use, so the lower index wins.
    snap = Snapshot(nodes=(gpus_node("n", 2),), workload=WORKLOAD)
    assert [d.index for d in place(snap, share_pod(500)).devices] == [0]


# --- fallbacks and other modes --------------------------------------------------------------


def test_without_a_workload_fragmentation_is_binpack_answer_for_answer() -> None:
    a = node("a", [gpu(i) for i in range(4)], busy=(0, 1, 2))
    b = gpus_node("b", 2, (used(0, 500),))
    snap = Snapshot(nodes=(a, b))
    for request_fn in (lambda p: share_pod(500, node_policy=p), lambda p: pod(1, node_policy=p)):
        frag, binpack = place(snap, request_fn(FRAG)), place(snap, request_fn("binpack"))
        assert msgspec.json.encode(frag) == msgspec.json.encode(binpack)
        assert "frag_delta" not in frag.score_parts


@pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])
@pytest.mark.parametrize("node_policy", ["binpack", "spread", None])
def test_the_workload_changes_nothing_for_the_other_policies(mode: Mode, node_policy: str | None) -> None:
    nodes = (node("a", [gpu(i) for i in range(4)], busy=(0, 1, 2)), gpus_node("b", 2, (used(0, 500),)))
    for request in (share_pod(500, node_policy=node_policy), pod(1, node_policy=node_policy)):
        with_mix = place(Snapshot(nodes=nodes, workload=WORKLOAD), request, mode)
        without = place(Snapshot(nodes=nodes), request, mode)
        assert msgspec.json.encode(with_mix) == msgspec.json.encode(without)


def test_hami_mode_refuses_the_policy_naming_the_annotation() -> None:
    snap = Snapshot(nodes=(gpus_node("a", 2),), workload=WORKLOAD)
    with pytest.raises(RequestError) as caught:
        place(snap, share_pod(500), Mode.HAMI)
    assert caught.value.field == "hami.io/node-scheduler-policy"
    assert "not a HAMi policy" in caught.value.reason


@pytest.mark.parametrize(
    "request_",
    [
        PodRequest(uid="m", requests={"metax-tech.com/gpu": "1"},
                   annotations={"hami.io/node-scheduler-policy": FRAG}),
        PodRequest(uid="n", requests={"aws.amazon.com/neuron": "1"},
                   annotations={"hami.io/node-scheduler-policy": FRAG}),
    ],
)  # fmt: skip
def test_every_vendor_accepts_the_policy(request_: PodRequest) -> None:
    # MetaX and Neuron measure free shares too (tests/engine/test_node_policies.py); no nodes, nothing fits.
    assert place(Snapshot(nodes=(), workload=WORKLOAD), request_).node is None


# --- the benchmark's bridge -----------------------------------------------------------------


def test_the_trace_replay_places_every_pod_through_the_engine_with_the_seeds_node_order() -> None:
    def trace_pod(milli: int, cpu: int = 1000, gpus: int = 1) -> PodRow:
        return PodRow(name="p", cpu_milli=cpu, memory_mib=1024, num_gpu=gpus, gpu_milli=milli)

    classes = [
        PodClass(cpu_milli=1000, num_gpu=1, gpu_milli=1000, probability=0.4),
        PodClass(cpu_milli=1000, num_gpu=1, gpu_milli=500, gpu_spec=("T4",), probability=0.4),
        PodClass(cpu_milli=4000, num_gpu=0, gpu_milli=0, probability=0.2),
    ]
    assert engine_workload(classes) == (
        WorkloadClass(gpus=1, milli=1000, weight=0.4),
        WorkloadClass(gpus=1, milli=500, weight=0.4, models=("T4",)),
    )
    assert engine_workload(classes, with_cpu=True)[2] == WorkloadClass(gpus=0, cpu_milli=4000, weight=0.2)
    rows = [NodeRow(name=n, cpu_milli=32000, memory_mib=65536, gpus=2, model="T4") for n in ("a", "b")]
    state = ClusterState(rows, node_order=[1, 0])  # this seed ranks b first
    policy = EngineTracePolicy(state, classes)
    assert policy.names == ["1-a", "0-b"]
    rng = np.random.default_rng(0)
    # Identical idle nodes: the tie goes to the seed's first node, b, although a comes first in the list.
    first = policy.choose(trace_pod(500), np.array([0, 1]), rng)
    assert first == Placement(node=1, gpus=(0,))
    state.place(trace_pod(500), first)
    policy.placed(trace_pod(500), first)
    # The next half share fills b's broken GPU (delta -250 there, +250 on a).
    assert policy.choose(trace_pod(500), np.array([0, 1]), rng) == Placement(node=1, gpus=(0,))
    # A CPU-only pod is the engine's too: it goes where its CPU leaves the GPU classes able to run.
    assert policy.choose(trace_pod(0, cpu=30000, gpus=0), np.array([0, 1]), rng) is not None


# --- CPU in the measure ----------------------------------------------------------------------


def test_a_pod_goes_where_its_cpu_does_not_strand_the_gpus() -> None:
    # One class: a whole GPU with 4 cores. a (8 cores) and b (16 cores), 2 idle GPUs each; the pod takes
    # a GPU and 6 cores. On a, 2 cores are left: the class can no longer run there, the other idle GPU
    # is all fragment (delta +1000, level 26); on b, 10 cores are left (delta 0, level 50): b, although
    # a sorts first. Without CPU in the workload, both are level 50 and a wins by name.
    nodes = (with_cpu(gpus_node("a", 2), 8), with_cpu(gpus_node("b", 2), 16))
    workload = (WorkloadClass(gpus=1, cpu_milli=4000),)
    decision = place(Snapshot(nodes=nodes, workload=workload), cpu_pod("6", gpus=1))
    assert decision.node == "b"
    assert decision.alternatives[0].score == pytest.approx(26 + 0.245, abs=0.25)
    assert decision.score_parts["frag_level"] == 50
    without = place(Snapshot(nodes=nodes, workload=(WorkloadClass(gpus=1),)), cpu_pod("6", gpus=1))
    assert without.node == "a"


def test_cpu_only_pods_are_placed_by_the_policy_too() -> None:
    # Classes: a whole GPU with 4 cores, and a CPU-only class. a: 8 cores, b: 32 cores, 1 idle GPU each.
    # A CPU-only pod of 6 cores leaves a 2: the GPU class cannot run there any more (delta +500, level 37);
    # on b nothing changes (level 50). Without the policy, a pod with no device is scored as kube-scheduler
    # scores it (LeastAllocated + BalancedAllocation): a holds 8 cores, b 32, so b too, with no frag_level.
    nodes = (with_cpu(gpus_node("a", 1), 8), with_cpu(gpus_node("b", 1), 32))
    workload = (WorkloadClass(gpus=1, cpu_milli=4000), WorkloadClass(gpus=0, cpu_milli=2000))
    decision = place(Snapshot(nodes=nodes, workload=workload), cpu_pod("6"))
    assert decision.node == "b"
    assert decision.devices == ()
    assert decision.score_parts["frag_level"] == 50
    assert decision.alternatives[0].node == "a"
    by_kube = place(Snapshot(nodes=nodes, workload=workload), cpu_pod("6", node_policy="binpack"))
    assert by_kube.node == "b"
    assert "frag_level" not in by_kube.score_parts


@pytest.mark.parametrize(("cpu", "winner"), [("8", "rich"), ("500m", "lean")])
def test_cpu_heavy_pods_go_to_spare_cpu_and_light_ones_leave_it(cpu: str, winner: str) -> None:
    # Two busy 4-GPU nodes (GPU 0 taken), 64 and 16 cores; the workload's 1 core per GPU makes an 8-core
    # GPU pod heavy and a half-core one light. Same level on both; the tie term decides.
    workload = (WorkloadClass(gpus=1, cpu_milli=1000),)
    for rich, lean in (("a", "b"), ("b", "a")):  # whichever name sorts first
        names = {"rich": rich, "lean": lean}
        nodes = (
            with_cpu(node(rich, [gpu(i) for i in range(4)], busy=(0,)), 64),
            with_cpu(node(lean, [gpu(i) for i in range(4)], busy=(0,)), 16),
        )
        decision = place(Snapshot(nodes=nodes, workload=workload), cpu_pod(cpu, gpus=1))
        assert decision.node == names[winner]
        assert decision.score_parts["frag_level"] == decision.alternatives[0].score // 1


def test_a_share_takes_a_gpu_already_shared_before_breaking_an_idle_one() -> None:
    # GPU 0 holds a quarter share, 1-3 idle; one class, a quarter share: every GPU keeps serving it,
    # delta 0 wherever the pod goes. Spread, the default GPU policy, would take an idle GPU; the policy
    # takes GPU 0 and keeps the three idle GPUs' links whole.
    n = node("n", [gpu(i) for i in range(4)], allocations=(used(0, 250),))
    snap = Snapshot(nodes=(n,), workload=(WorkloadClass(gpus=1, milli=250),))
    assert [d.index for d in place(snap, share_pod(250, node_policy="spread")).devices] != [0]
    assert [d.index for d in place(snap, share_pod(250)).devices] == [0]
