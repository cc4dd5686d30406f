"""Each paper policy's choice on hand-built clusters, derived from the policy's definition."""

from __future__ import annotations

import numpy as np
import pytest

from bench.cluster import ClusterState, Placement
from bench.fragmentation import PodClass
from bench.trace_policies import (
    BestFit,
    DotProduct,
    Fgd,
    GpuClustering,
    GpuPacking,
    RandomFit,
    Resolution,
    Ties,
    distinct_rows,
    fgd_score,
    normalise_scores,
    pick_best,
    variant,
)
from tests.bench.helpers import cluster, node, pod

ONE_SHARE_CLASS = [PodClass(cpu_milli=0, num_gpu=1, gpu_milli=1000, probability=1.0)]


def choose(policy_cls, state: ClusterState, p, seed: int = 0, classes=ONE_SHARE_CLASS):
    policy = policy_cls(state, classes)
    candidates = np.flatnonzero(state.feasible(p))
    return policy.choose(p, candidates, np.random.default_rng(seed))


def test_best_fit_takes_the_node_with_least_left_after_placing():
    state = cluster([node("a", gpus=4), node("b", gpus=4)], held={1: [1000, 1000, 0, 0]})
    assert choose(BestFit, state, pod(cpu=1000)).node == 1


def test_best_fit_counts_cpu_too():
    # Same GPUs free on both; node 0 has less CPU left, so it is the better fit.
    state = cluster([node("a", gpus=2), node("b", gpus=2)], cpu_used={0: 20000})
    assert choose(BestFit, state, pod(cpu=1000)).node == 0


def test_dot_product_prefers_the_smaller_alignment_with_the_free_vector():
    state = cluster([node("a", gpus=4), node("b", gpus=4)], held={0: [1000, 1000, 1000, 0]})
    assert choose(DotProduct, state, pod(cpu=4000)).node == 0


def test_gpu_packing_prefers_a_shared_gpu_then_a_used_node_then_an_idle_node():
    nodes = [node("idle", gpus=2), node("used", gpus=2), node("shared", gpus=2)]
    state = cluster(nodes, held={1: [1000, 0], 2: [500, 0]})
    share = pod(gpu_milli=300)
    assert choose(GpuPacking, state, share).node == 2  # case 1: the GPU already shared fits 300
    state2 = cluster(nodes[:2], held={1: [1000, 0]})
    assert choose(GpuPacking, state2, share).node == 1  # case 2 beats case 3
    whole = pod(gpu_milli=1000)
    assert choose(GpuPacking, state, whole).node in (1, 2)  # used nodes before the idle one


def test_gpu_clustering_groups_pods_of_the_same_affinity():
    state = cluster([node("a", gpus=4), node("b", gpus=4), node("c", gpus=4)])
    policy = GpuClustering(state, ONE_SHARE_CLASS)
    rng = np.random.default_rng(0)
    half = pod(gpu_milli=500)
    whole = pod(gpu_milli=1000)
    # Node 1 holds a fractional pod only, node 2 a whole-GPU pod.
    for p, placement in ((half, Placement(node=1, gpus=(0,))), (whole, Placement(node=2, gpus=(0,)))):
        state.place(p, placement)
        policy.placed(p, placement)
    # Every fractional pod has the affinity "share": a 250-milli pod joins the 500-milli one.
    assert policy.choose(pod(gpu_milli=250), np.arange(3), rng).node == 1
    assert policy.choose(whole, np.arange(3), rng).node == 2
    # An affinity no node holds yet ("2-gpu") goes to the idle node before nodes holding others.
    assert policy.choose(pod(num_gpu=2), np.arange(3), rng).node == 0


def test_fgd_picks_the_node_and_gpu_whose_fragmentation_grows_least():
    # Classes want whole GPUs. Node 0 has GPUs [1000, 500 free]; node 1 is idle.
    # A 500 pod on node 0's half-used GPU removes its 500 fragment (gain +500);
    # on its idle GPU it creates one (gain -500); on node 1 it creates one (gain -500).
    state = cluster([node("a", gpus=2), node("b", gpus=2)], held={0: [0, 500]})
    choice = choose(Fgd, state, pod(gpu_milli=500))
    assert (choice.node, choice.gpus) == (0, (1,))


def test_fgd_whole_gpu_pod_avoids_breaking_the_node_a_class_needs():
    # Class: 2 whole GPUs. Node 0 has 2 free GPUs (hostable), node 1 has 3 free (hostable either way after).
    classes = [PodClass(cpu_milli=0, num_gpu=2, gpu_milli=1000, probability=1.0)]
    state = cluster([node("a", gpus=2), node("b", gpus=4)], held={1: [1000, 0, 0, 0]})
    # On node 0 the remaining 1000 can no longer host a 2-GPU pod: +1000 fragment. On node 1: 2 remain, +0.
    assert choose(Fgd, state, pod(gpu_milli=1000), classes=classes).node == 1


def test_random_fit_only_picks_feasible_nodes_and_spreads():
    state = cluster([node("a", gpus=2), node("b", gpus=2), node("c", gpus=2, cpu=500)])
    picks = {choose(RandomFit, state, pod(cpu=1000), seed=s).node for s in range(40)}
    assert picks == {0, 1}  # node c lacks CPU


def test_ties_random_or_first():
    scores = np.array([1.0, 3.0, 3.0, 2.0])
    candidates = np.array([10, 11, 12, 13])
    assert pick_best(scores, candidates, None) == 11
    seen = {pick_best(scores, candidates, np.random.default_rng(s)) for s in range(30)}
    assert seen == {11, 12}
    rank = np.zeros(14, dtype=np.int64)
    rank[11], rank[12] = 5, 2  # node 12 comes first in the node order
    assert pick_best(scores, candidates, np.random.default_rng(0), rank) == 12
    extra = variant(BestFit, Ties.FIRST, Resolution.EXACT)
    assert extra.name == "best-fit/exact-first-tie" and extra.ties is Ties.FIRST
    assert extra.resolution is Resolution.EXACT and BestFit.resolution is Resolution.SIMULATOR


def test_fgd_score_is_the_simulators_truncated_sigmoid():
    gains = np.array([0.0, -500.0, 1000.0, -np.inf])
    assert fgd_score(gains).tolist() == [50.0, 37.0, 73.0, -np.inf]  # sigmoid(-0.5) = 0.3775 -> 37


def test_normalised_scores_span_0_to_100_in_integers():
    assert normalise_scores(np.array([10, 20, 30])).tolist() == [0, 50, 100]
    assert normalise_scores(np.array([0, 1, 3])).tolist() == [0, 33, 100]
    assert normalise_scores(np.array([7, 7])).tolist() == [0, 0]


def test_integer_fgd_scores_tie_close_gains_and_the_node_order_decides():
    # Class: 500 milli of one GPU. Node 0 has 520 free, node 1 510: both host the class (fragment 0).
    # A 100-milli pod leaves 420 / 410, below 500: gains -420 / -410. Exact scores pick node 1; the
    # integer scores are both int(100 * sigmoid(-0.42 | -0.41)) = 39, so the node order decides.
    classes = [PodClass(cpu_milli=0, num_gpu=1, gpu_milli=500, probability=1.0)]
    nodes = [node("a", gpus=1), node("b", gpus=1)]
    state = ClusterState(nodes, node_order=[0, 1])
    for i, held in ((0, 480), (1, 490)):
        state.place(pod(f"h{i}", 1, held, cpu=0, memory=0), Placement(node=i, gpus=(0,)))
    small = pod(gpu_milli=100)
    assert choose(Fgd, state, small, classes=classes).node == 0  # equal integer scores: rank 0 = node 0
    exact = variant(Fgd, Ties.NODE_ORDER, Resolution.EXACT)
    assert choose(exact, state, small, classes=classes).node == 1  # exact: node 1's fragment grows less


def test_cpu_only_pods_follow_the_node_order_when_every_node_scores_alike():
    nodes = [node("a"), node("b"), node("c")]
    cpu_pod = pod(num_gpu=0, gpu_milli=0)
    for order, expected in (([2, 0, 1], 1), ([0, 1, 2], 0)):
        state = ClusterState(nodes, node_order=order)
        for policy in (Fgd, BestFit, GpuPacking, GpuClustering, DotProduct):
            assert choose(policy, state, cpu_pod).node == expected, policy.name


def test_node_order_must_be_a_permutation():
    with pytest.raises(ValueError, match="node_order"):
        ClusterState([node("a"), node("b")], node_order=[0, 0])


def test_gpu_model_constraint_filters_nodes():
    state = cluster([node("a", gpus=2, model="T4"), node("b", gpus=2, model="V100M32")])
    assert list(np.flatnonzero(state.feasible(pod(spec=("V100M32",))))) == [1]
    with pytest.raises(ValueError, match="needs"):
        state.place(pod(gpu_milli=1000), Placement(node=0, gpus=(0,)))
        state.place(pod(gpu_milli=1000), Placement(node=0, gpus=(0,)))


def test_random_fit_takes_a_random_gpu_that_fits_for_a_shared_pod():
    # One node, GPUs with 1000 / 300 / 600 free: a 500-milli pod fits GPUs 0 and 2, and both get picked.
    state = cluster([node("a", gpus=3)], held={0: [0, 700, 400]})
    picks = {choose(RandomFit, state, pod(gpu_milli=500), seed=s).gpus for s in range(30)}
    assert picks == {(0,), (2,)}


def test_distinct_rows_groups_equal_rows_like_a_row_wise_unique():
    rng = np.random.default_rng(5)
    keys = rng.integers(-1, 3, size=(300, 6))
    first, inverse = distinct_rows(keys)
    assert np.array_equal(keys[first][inverse], keys)  # every row maps to an equal representative
    assert len(first) == len(np.unique(keys, axis=0))  # and there is one representative per distinct row
