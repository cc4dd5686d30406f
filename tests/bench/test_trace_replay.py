from __future__ import annotations

import pytest

from bench.fragmentation import typical_classes
from bench.trace_policies import BestFit
from bench.trace_replay import EARLIER, SIMULATOR, arrival_sequence, replay
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


def test_inflation_within_target_stops_before_passing_130_percent():
    pods = [pod(f"p{i}", 1, 700) for i in range(4)]  # 2,800 milli
    sequence = arrival_sequence(pods, capacity_milli=4000, seed=3, within_target=True)
    demand = sum(p.gpu_milli_total for p in sequence)
    assert demand <= 1.3 * 4000 < demand + 700  # one more copy would pass the target


def test_simulator_node_order_is_a_fixed_permutation_per_seed():
    first, again, other = (SIMULATOR.node_order(50, s) for s in (1, 1, 2))
    assert first is not None and other is not None and again is not None
    assert sorted(first.tolist()) == list(range(50))
    assert first.tolist() == again.tolist() and first.tolist() != other.tolist()
    assert EARLIER.node_order(50, 1) is None  # list order


def test_mean_reading_averages_the_events_whose_arrived_share_rounds_to_100():
    # One 1-GPU node; pods of 1 milli with no CPU: arrived % rises 0.1 per pod, every pod fits until the
    # GPU is full. Events at 99.5 ... 100.4 % leave 0.5, 0.4, 0.3, 0.2, 0.1, then 0 % unallocated.
    nodes = [node("a", gpus=1)]
    pods = [pod(f"p{i}", 1, 1, cpu=0, memory=0) for i in range(1100)]
    classes = typical_classes(pods)
    simulator = replay(nodes, pods, BestFit, classes, seed=0, protocol=SIMULATOR)
    earlier = replay(nodes, pods, BestFit, classes, seed=0, protocol=EARLIER)
    assert simulator.unallocated_pct == pytest.approx((0.5 + 0.4 + 0.3 + 0.2 + 0.1) / 10)
    assert earlier.unallocated_pct == pytest.approx(0.0)  # read when demand first reaches 100 %
