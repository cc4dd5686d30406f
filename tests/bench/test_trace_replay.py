from __future__ import annotations

import pytest

from bench.fragmentation import typical_classes
from bench.trace_policies import BestFit
from bench.trace_replay import arrival_sequence, replay
from tests.bench.helpers import node, pod


def test_arrival_sequence_shuffles_then_extends_to_130_percent():
    pods = [pod(f"p{i}", 1, 500) for i in range(4)]  # 2,000 milli of demand
    sequence = arrival_sequence(pods, capacity_milli=4000, seed=1)
    assert {p.name for p in sequence[:4]} == {p.name for p in pods}  # every trace pod once, first
    demand = sum(p.gpu_milli_total for p in sequence)
    assert demand >= 1.3 * 4000 and demand - sequence[-1].gpu_milli_total < 1.3 * 4000
    assert arrival_sequence(pods, 4000, seed=1) == sequence  # same seed, same order


def test_pods_that_fit_nowhere_are_dropped_and_the_reading_is_at_100_percent():
    # One 2-GPU node (capacity 2,000 milli). Pods of 1,000 milli: the first two fit, then everything drops.
    nodes = [node("a", gpus=2)]
    pods = [pod(f"p{i}", 1, 1000) for i in range(3)]
    result = replay(nodes, pods, BestFit, typical_classes(pods), seed=0, stop_at=1.3)
    assert result.unallocated_pct == pytest.approx(0.0)  # at 100 % demand both GPUs are allocated
    assert result.pods_dropped == result.pods_arrived - 2
    assert result.curve and result.curve[-1].arrived_pct >= 100.0


def test_cpu_only_nodes_are_left_out():
    # A CPU-only pod too big for the GPU node would fit the CPU-only node, but the protocol keeps GPU nodes only.
    nodes = [node("a", gpus=2, cpu=32000), node("cpu", gpus=0, model="", cpu=64000)]
    pods = [pod("g", 1, 1000), pod("c", 0, 0, cpu=50000)]
    result = replay(nodes, pods, BestFit, typical_classes(pods), seed=0)
    assert result.unallocated_pct == pytest.approx(0.0)
    assert result.pods_dropped == result.pods_arrived - 2  # every CPU-only pod dropped, both GPU pods placed
