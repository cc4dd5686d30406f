"""The FGD artifact's evaluation protocol, replayed on any node/pod list of the trace format.

Only GPU nodes; nothing is ever deleted; the pod list in a random order per
seed, then extended by pods drawn uniformly with replacement until the total
GPU demand reaches 130 % of capacity; one pod at a time; CPU and memory must
fit too; a pod that fits nowhere is dropped and never retried. The figure is
the unallocated GPU share when the arrived GPU demand first reaches 100 % of
capacity.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import msgspec
import numpy as np

from bench.cluster import ClusterState
from bench.fragmentation import FragmentationModel, PodClass
from bench.trace import NodeRow, PodRow
from bench.trace_policies import PolicyFactory

TARGET_DEMAND = 1.30
READ_AT_DEMAND = 1.00


class CurvePoint(msgspec.Struct, frozen=True, kw_only=True):
    arrived_pct: float  # arrived GPU demand, % of capacity
    unallocated_pct: float  # 100 - allocated milli-GPU / capacity
    fragmented_pct: float  # the paper's fragmentation measure summed over nodes, % of capacity


class ReplayResult(msgspec.Struct, frozen=True, kw_only=True):
    policy: str
    seed: int
    unallocated_pct: float  # at READ_AT_DEMAND
    fragmented_pct: float  # at READ_AT_DEMAND
    pods_arrived: int
    pods_dropped: int
    seconds: float
    decisions: int
    curve: tuple[CurvePoint, ...]


def arrival_sequence(
    pods: Sequence[PodRow], capacity_milli: int, seed: int, target: float = TARGET_DEMAND
) -> list[PodRow]:
    """The trace shuffled by `seed`, extended by uniform draws with replacement to `target` x capacity."""
    rng = np.random.default_rng(seed)
    sequence = [pods[i] for i in rng.permutation(len(pods))]
    demand = sum(p.gpu_milli_total for p in sequence)
    if not any(p.gpu_milli_total for p in pods):
        raise ValueError("pods: no pod asks for a GPU, the demand can never reach the target")
    while demand < target * capacity_milli:
        extra = pods[int(rng.integers(len(pods)))]
        sequence.append(extra)
        demand += extra.gpu_milli_total
    return sequence


def _fragmented_pct(state: ClusterState, classes: Sequence[PodClass]) -> float:
    return 100.0 * FragmentationModel(classes, state).cluster_fragmentation() / state.capacity_milli


def replay(
    nodes: Sequence[NodeRow],
    pods: Sequence[PodRow],
    factory: PolicyFactory,
    classes: Sequence[PodClass],
    *,
    seed: int,
    stop_at: float = READ_AT_DEMAND,
    curve_step_pct: float = 1.0,
) -> ReplayResult:
    """Replay one seed under one policy until the arrived demand reaches `stop_at` x capacity."""
    state = ClusterState([n for n in nodes if n.gpus > 0])
    policy = factory(state, classes)
    rng = np.random.default_rng(seed + 7919)  # the policy's own randomness, apart from the arrival order
    sequence = arrival_sequence(pods, state.capacity_milli, seed)
    arrived = 0
    dropped = 0
    count = 0
    curve: list[CurvePoint] = []
    next_point = curve_step_pct
    reading: tuple[float, float] | None = None
    decisions = 0
    start = time.perf_counter()
    for pod in sequence:
        count += 1
        arrived += pod.gpu_milli_total
        feasible = np.flatnonzero(state.feasible(pod))
        if len(feasible) == 0:
            dropped += 1
        else:
            placement = policy.choose(pod, feasible, rng)
            decisions += 1
            if placement is None:  # the policy's own device rules refused every node
                dropped += 1
            else:
                state.place(pod, placement)
                policy.placed(pod, placement)
        arrived_pct = 100.0 * arrived / state.capacity_milli
        if arrived_pct >= next_point:
            curve.append(
                CurvePoint(
                    arrived_pct=arrived_pct,
                    unallocated_pct=state.unallocated_gpu_pct(),
                    fragmented_pct=_fragmented_pct(state, classes),
                )
            )
            next_point += curve_step_pct
        if reading is None and arrived >= READ_AT_DEMAND * state.capacity_milli:
            reading = (state.unallocated_gpu_pct(), _fragmented_pct(state, classes))
        if arrived >= stop_at * state.capacity_milli:
            break
    seconds = time.perf_counter() - start
    if reading is None:
        reading = (state.unallocated_gpu_pct(), _fragmented_pct(state, classes))
    return ReplayResult(
        policy=policy.name,
        seed=seed,
        unallocated_pct=reading[0],
        fragmented_pct=reading[1],
        pods_arrived=count,
        pods_dropped=dropped,
        seconds=seconds,
        decisions=decisions,
        curve=tuple(curve),
    )
