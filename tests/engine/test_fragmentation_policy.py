"""The fragmentation node policy (FGD): the measure, the node it picks, the GPU, fallbacks, ties.

Expectations are worked out by hand from the definition in
services/placer/engine/fragmentation.py: for each class, a device's free share
counts as fragment when the class cannot use it (or all free share when the
class cannot run on the node at all); classes are weighted by popularity.
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from engine_builders import gpu, node, place, pod

from bench.cluster import ClusterState, Placement
from bench.fragmentation import PodClass
from bench.topoplace_trace import TopoplaceTracePolicy, engine_workload
from bench.trace import NodeRow, PodRow
from services.placer.engine import Allocation, Mode, NodeState, PodRequest, RequestError, Snapshot
from services.placer.engine.fragmentation import FreeShare, class_fragment, fragmentation
from services.placer.engine.model import PlaceInput, WorkloadClass

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


@pytest.mark.parametrize(
    ("field", "value"), [("gpus", 0), ("milli", 0), ("milli", 1001), ("weight", 0.0)]
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
    #    F after 0, delta -250. b wins although a sorts first.
    snap = Snapshot(nodes=(gpus_node("a", 2), gpus_node("b", 2, (used(1, 500),))), workload=WORKLOAD)
    decision = place(snap, share_pod(500))
    assert decision.node == "b"
    assert [d.index for d in decision.devices] == [1]
    assert decision.score_parts["frag_delta"] == pytest.approx(-250.0)
    assert decision.score == pytest.approx(250.0)
    loser = decision.alternatives[0]
    assert loser.node == "a"
    assert loser.score == pytest.approx(-250.0)
    assert "frag_delta 250 vs -250" in loser.reason


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
    assert decision.alternatives[0].score == pytest.approx(-250.0)


def test_whole_gpu_pods_go_where_no_idle_gpu_is_left_half_broken() -> None:
    # Classes {1 whole GPU, 2 whole GPUs}, equally likely; a 1-GPU whole pod.
    # a: 2 idle GPUs -> 1 idle after: the 2-GPU class cannot run, its fragment is 1000: delta +500.
    # b: 3 idle GPUs -> 2 idle after: both classes still run, delta 0.
    workload = (WorkloadClass(gpus=1, weight=1.0), WorkloadClass(gpus=2, weight=1.0))
    snap = Snapshot(nodes=(gpus_node("a", 2), gpus_node("b", 3)), workload=workload)
    decision = place(snap, pod(1, node_policy=FRAG))
    assert decision.node == "b"
    assert decision.score_parts["frag_delta"] == 0.0
    assert decision.alternatives[0].score == pytest.approx(-500.0)


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


def test_equal_fragmentation_goes_to_the_emptier_node() -> None:
    # One class, 1 whole GPU. a: GPUs 0-1 taken, 2-3 idle; b: 4 idle. Taking an idle GPU leaves
    # no free share the class cannot use on either: delta 0 both. Tie -> the emptier node after
    # the pod: b (1/4 in use) over a (3/4), although a sorts first; the tie term is 1e-4 x (1 - fill).
    snap = Snapshot(
        nodes=(node("a", [gpu(i) for i in range(4)], busy=(0, 1)), gpus_node("b", 4)),
        workload=(WorkloadClass(gpus=1),),
    )
    decision = place(snap, pod(1, node_policy=FRAG))
    assert decision.node == "b"
    assert decision.score_parts["frag_delta"] == 0.0
    assert decision.score_parts["tie_spread"] == pytest.approx(1e-4 * 0.75)
    assert decision.alternatives[0].score == pytest.approx(1e-4 * 0.25)
    assert "tie_spread" in decision.alternatives[0].reason


def test_the_tie_term_never_outweighs_a_fragmentation_difference() -> None:
    # a: 8 idle GPUs, the emptier node by far; b: one GPU half used. A 0.5 share: delta +250 on a,
    # -250 on b: b, the fuller node, wins (the tie term is at most 1e-4, deltas count to 1e-3).
    snap = Snapshot(nodes=(gpus_node("a", 8), gpus_node("b", 2, (used(1, 500),))), workload=WORKLOAD)
    assert place(snap, share_pod(500)).node == "b"


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
def test_vendors_without_a_fragmentation_model_refuse_the_policy(request_: PodRequest) -> None:
    with pytest.raises(RequestError) as caught:
        place(Snapshot(nodes=(), workload=WORKLOAD), request_)
    assert caught.value.field == "hami.io/node-scheduler-policy"
    assert "binpack or spread" in caught.value.reason


# --- the benchmark's bridge -----------------------------------------------------------------


def test_the_trace_replay_passes_the_typical_classes_and_the_policy_to_the_engine() -> None:
    def trace_pod(milli: int) -> PodRow:
        return PodRow(name="p", cpu_milli=1000, memory_mib=1024, num_gpu=1, gpu_milli=milli)

    classes = [
        PodClass(cpu_milli=1000, num_gpu=1, gpu_milli=1000, probability=0.5),
        PodClass(cpu_milli=1000, num_gpu=1, gpu_milli=500, gpu_spec=("T4",), probability=0.5),
    ]
    assert engine_workload(classes) == (
        WorkloadClass(gpus=1, milli=1000, weight=0.5),
        WorkloadClass(gpus=1, milli=500, weight=0.5, models=("T4",)),
    )
    rows = [NodeRow(name=n, cpu_milli=32000, memory_mib=65536, gpus=2, model="T4") for n in ("a", "b")]
    state = ClusterState(rows)
    state.place(trace_pod(500), Placement(node=1, gpus=(1,)))
    policy = TopoplaceTracePolicy(state, classes, Mode.DEFAULT, fragmentation=True)
    policy.placed(trace_pod(500), Placement(node=1, gpus=(1,)))
    assert policy.name == "topoplace-frag"
    # as in the two-node case above: the half-used GPU of b is filled, although a sorts first
    choice = policy.choose(trace_pod(500), np.array([0, 1]), np.random.default_rng(0))
    assert choice == Placement(node=1, gpus=(1,))
