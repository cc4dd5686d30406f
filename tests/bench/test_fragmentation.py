from __future__ import annotations

import numpy as np
import pytest

from bench.cluster import Placement
from bench.fragmentation import FragmentationModel, PodClass, node_fragmentation, typical_classes
from tests.bench.helpers import cluster, node, pod

# Hand-computed case. A node with GPU free shares [1000, 500, 200, 0] and 10 CPU cores free;
#   class A (1 GPU x 300 milli, 1 core, p 0.5): 2 GPUs have >= 300 free -> hostable;
#            fragment = GPUs whose free share is below 300: 200 + 0 = 200
#   class B (2 whole GPUs, 1 core, p 0.3): only 1 GPU fully free -> cannot host -> all 1700 free
#   class C (1 whole GPU, 20 cores, p 0.2): too little CPU -> all 1700 free
#   F = 0.5 * 200 + 0.3 * 1700 + 0.2 * 1700 = 950
CLASSES = [
    PodClass(cpu_milli=1000, num_gpu=1, gpu_milli=300, probability=0.5),
    PodClass(cpu_milli=1000, num_gpu=2, gpu_milli=1000, probability=0.3),
    PodClass(cpu_milli=20000, num_gpu=1, gpu_milli=1000, probability=0.2),
]


def test_hand_computed_node_fragmentation():
    assert node_fragmentation([1000, 500, 200, 0], 10000, "T4", CLASSES) == pytest.approx(950.0)


def test_vectorised_measure_matches_the_hand_computed_case():
    state = cluster([node("a", gpus=4, cpu=10000)], held={0: [0, 500, 800, 1000]})
    model = FragmentationModel(CLASSES, state)
    assert model.frag[0] == pytest.approx(950.0)
    assert model.cluster_fragmentation() == pytest.approx(950.0)


def test_a_class_that_does_not_accept_the_model_sees_everything_as_fragment():
    classes = [PodClass(cpu_milli=0, num_gpu=1, gpu_milli=100, gpu_spec=("V100M32",), probability=1.0)]
    assert node_fragmentation([1000, 600], 1000, "T4", classes) == pytest.approx(1600.0)
    state = cluster([node("a", gpus=2, model="T4")], held={0: [0, 400]})
    assert FragmentationModel(classes, state).frag[0] == pytest.approx(1600.0)


def test_typical_classes_cover_the_threshold_and_renormalise():
    pods = [pod("a", 1, 300)] * 6 + [pod("b", 2, 1000)] * 3 + [pod("c", 1, 1000, cpu=5)] + [pod("cpu", 0, 0)] * 50
    classes = typical_classes(pods, coverage=0.9)
    # 6/10 < 0.9, then 9/10 reaches it: two classes, CPU-only pods ignored, probabilities 6/9 and 3/9.
    assert [(c.num_gpu, c.gpu_milli) for c in classes] == [(1, 300), (2, 1000)]
    assert [c.probability for c in classes] == pytest.approx([6 / 9, 3 / 9])
    with pytest.raises(ValueError, match="coverage"):
        typical_classes(pods, coverage=0)


def test_incremental_after_states_equal_a_fresh_computation():
    rng = np.random.default_rng(3)
    nodes = [node(f"n{i}", gpus=4, cpu=16000) for i in range(6)]
    held = {i: [int(x) for x in rng.choice([0, 200, 500, 1000], size=4)] for i in range(6)}
    state = cluster(nodes, held=held)
    model = FragmentationModel(CLASSES, state)
    candidates = np.arange(6)
    share = pod("s", 1, 300, cpu=2000)
    after = model.after_share(candidates, share)
    for i in candidates:
        for g in range(4):
            free = [int(x) for x in state.gpu_free[i]]
            if free[g] < 300:
                assert np.isinf(after[i, g])
                continue
            free[g] -= 300
            expected = node_fragmentation(free, int(state.cpu_free[i]) - 2000, "T4", CLASSES)
            assert after[i, g] == pytest.approx(expected)
    whole = pod("w", 1, 1000, cpu=1000)
    after_whole = model.after_whole(candidates, whole)
    for i in candidates:
        free = [int(x) for x in state.gpu_free[i]]
        if 1000 not in free:
            continue
        free[free.index(1000)] = 0
        assert after_whole[i] == pytest.approx(node_fragmentation(free, int(state.cpu_free[i]) - 1000, "T4", CLASSES))


def test_refresh_follows_a_placement():
    state = cluster([node("a", gpus=2, cpu=10000)])
    model = FragmentationModel(CLASSES, state)
    assert model.frag[0] == pytest.approx(0.2 * 2000)  # only class C (too much CPU) sees fragment
    state.place(pod("x", 1, 800, cpu=0), Placement(node=0, gpus=(0,)))
    model.refresh(0)
    assert model.frag[0] == pytest.approx(node_fragmentation([200, 1000], 10000, "T4", CLASSES))


def test_typical_classes_with_cpu_only_shapes_cover_all_pods():
    pods = [pod("c", 0, 0, cpu=2000)] * 6 + [pod("g", 1, 500)] * 3 + [pod("w", 1, 1000)]
    gpu_only = typical_classes(pods, coverage=0.95)
    assert {c.num_gpu for c in gpu_only} == {1}  # the CPU-only shape is left out
    everything = typical_classes(pods, coverage=0.85, include_cpu_only=True)
    # 6 CPU-only + 3 shared = 90 % >= 85 %: two shapes, renormalised over the 9 pods they cover.
    assert [(c.num_gpu, c.probability) for c in everything] == [(0, pytest.approx(6 / 9)), (1, pytest.approx(3 / 9))]


def test_a_cpu_only_class_counts_every_idle_gpu_as_a_fragment():
    # The simulator never counts a pod without GPUs as "satisfied": all 1,500 free milli-GPU are its fragment,
    # however much CPU is free.
    classes = [
        PodClass(cpu_milli=1000, num_gpu=0, gpu_milli=0, probability=0.5),
        PodClass(cpu_milli=1000, num_gpu=1, gpu_milli=500, probability=0.5),
    ]
    assert node_fragmentation([1000, 500], 30000, "T4", classes) == pytest.approx(0.5 * 1500 + 0.5 * 0)
    state = cluster([node("a", gpus=2, cpu=32000)], held={0: [0, 500]})
    assert FragmentationModel(classes, state).frag[0] == pytest.approx(750.0)
