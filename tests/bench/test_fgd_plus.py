"""topoplace-fgd+'s rules on hand-built clusters: the in-level CPU rule, broken groups first, link-optimal sets."""

from __future__ import annotations

import numpy as np

from bench.cluster import ClusterState, Placement
from bench.fgd_plus import FgdPlus
from bench.fragmentation import PodClass
from bench.links import optimum
from bench.trace_links import TraceLinkMeter, node_pair_table
from tests.bench.helpers import cluster, node, pod

WHOLE = [PodClass(cpu_milli=1000, num_gpu=1, gpu_milli=1000, probability=1.0)]


def _choose(state: ClusterState, p, classes=WHOLE) -> Placement:
    policy = FgdPlus(state, classes)
    return policy.choose(p, np.flatnonzero(state.feasible(p)), np.random.default_rng(0))


def test_a_cpu_only_pod_goes_to_the_node_with_cpu_to_spare_for_its_free_gpus():
    # Both nodes: 2 free GPUs, 32 cores (16 per GPU). Node 0 has 20 cores used: 12 left for 2 GPUs (short);
    # node 1 has 4 used: 28 left. FGD's level is the same on both (the pod takes no GPU and the class still
    # fits), so plain FGD follows the node order (node 0); fgd+ sends it where CPU is spare.
    state = cluster([node("a", gpus=2), node("b", gpus=2)], cpu_used={0: 20000, 1: 4000})
    assert _choose(state, pod(num_gpu=0, gpu_milli=0, cpu=2000)).node == 1


def test_gpu_pods_light_on_cpu_go_to_the_node_short_of_cpu_and_ties_follow_the_node_order():
    # A 1-GPU pod with 1 core (below the nodes' 16 cores per GPU): same FGD level on both nodes; it goes to
    # node 0, short of CPU, and leaves node 1's spare CPU to CPU-heavy pods, whatever the node order.
    state = ClusterState([node("a", gpus=2), node("b", gpus=2)], node_order=[1, 0])
    state.cpu_free[0] -= 20000
    assert _choose(state, pod(gpu_milli=1000, cpu=1000)).node == 0
    even = ClusterState([node("a", gpus=2), node("b", gpus=2)], node_order=[1, 0])
    assert _choose(even, pod(gpu_milli=1000, cpu=1000)).node == 1  # equal in every key: rank 0 = node 1


def test_gpu_pods_go_to_a_used_node_before_an_idle_one_inside_a_level():
    # Node 0 idle, node 1 with one GPU held (4-GPU nodes, whole-GPU class: a 1-GPU pod scores alike on both).
    # The idle node comes first in the node order and has the least CPU spare, but the used node wins.
    state = ClusterState([node("a", gpus=4), node("b", gpus=4)], node_order=[0, 1])
    state.place(pod("h", 1, 1000, cpu=0, memory=0), Placement(node=1, gpus=(0,)))
    state.cpu_free[0] -= 20000
    assert _choose(state, pod(gpu_milli=1000, cpu=1000)).node == 1


def test_a_shared_pod_goes_to_a_gpu_of_an_already_broken_group():
    # An 8-GPU node whose GPU 5 (second quad) is in use; the class wants whole GPUs, so any idle GPU scores
    # alike. Plain FGD takes GPU 0 and breaks the first quad too; fgd+ stays in the broken quad.
    state = cluster([node("a", gpus=8, model="V100M32", cpu=96000)], held={0: [0, 0, 0, 0, 0, 1000, 0, 0]})
    choice = _choose(state, pod(gpu_milli=300))
    assert choice.gpus[0] in (4, 6, 7)


def test_multi_gpu_pods_take_a_link_optimal_set_in_the_broken_group():
    # DGX-1 V100: GPUs 1 and 6 taken. A 2-GPU pod must get an NVLink-optimal pair; the first free GPUs
    # (0, 2) would be one too on DGX-1, so check optimality against the exhaustive optimum instead.
    state = cluster([node("a", gpus=8, model="V100M32", cpu=96000)], held={0: [0, 1000, 0, 0, 0, 0, 1000, 0]})
    choice = _choose(state, pod(num_gpu=2, gpu_milli=1000))
    table = node_pair_table(state, 0)
    free = [g for g in range(8) if g not in (1, 6)]
    assert table.set_score(choice.gpus) == optimum(table, free, 2)
    for k in (4, 1):
        picked = _choose(state, pod(num_gpu=k, gpu_milli=1000))
        assert len(picked.gpus) == k and not {1, 6} & set(picked.gpus)


def test_link_meter_scores_sets_against_the_best_free_set():
    state = cluster([node("a", gpus=8, model="V100M32", cpu=96000)])
    meter = TraceLinkMeter(state)
    table = node_pair_table(state, 0)
    best = optimum(table, range(8), 4)
    worst = min(
        ((a, b, c, d) for a in range(8) for b in range(a + 1, 8) for c in range(b + 1, 8) for d in range(c + 1, 8)),
        key=table.set_score,
    )
    meter.observe(0, worst)
    meter.observe(0, (0,))  # single GPUs are not counted
    assert len(meter.quality) == 1
    assert meter.mean_pct == 100.0 * table.set_score(worst) / best < 100.0
    assert meter.optimal_pct == 0.0


def test_in_a_replay_every_multi_gpu_pod_of_fgd_plus_is_on_a_link_optimal_set():
    from bench.trace_replay import SIMULATOR, replay

    nodes = [node(f"n{i}", gpus=8, model="V100M32", cpu=96000, memory=1 << 20) for i in range(3)]
    shapes = [(1, 1000), (1, 300), (2, 1000), (4, 1000), (1, 500), (3, 1000)]
    pods = [pod(f"p{i}", k, milli, cpu=2000) for i, (k, milli) in enumerate(shapes * 4)]
    result = replay(nodes, pods, FgdPlus, SIMULATOR.classes(pods), seed=1)
    assert result.multi_gpu_pods > 0
    assert result.link_optimal_pct == 100.0 and result.link_quality_pct == 100.0
