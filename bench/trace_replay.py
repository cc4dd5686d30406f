"""The FGD artifact's evaluation protocol, replayed on any node/pod list of the trace format.

Only GPU nodes; nothing is ever deleted; the pod list in a random order per
seed, then extended by pods drawn uniformly with replacement up to 130 % of
capacity in GPU demand; one pod at a time; CPU and memory must fit too; a pod
that fits nowhere is dropped and never retried.

`SIMULATOR` (the reference) follows the authors' simulator in four more rules:
ties between equal node scores go to a fixed random node order per seed (its
node names carry a per-seed random prefix and the smallest name wins); the
typical pods cover all pods, CPU-only shapes included; the figure is the mean
unallocated GPU share over the pod events whose arrived demand rounds to
100 % of capacity; the inflation stops before the first copy that would pass
130 %. `EARLIER` is our earlier replay (list-order node ranks, GPU-pod typical
shapes, read when demand first reaches 100 %, inflate until >= 130 %).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import msgspec
import numpy as np

from bench.cluster import ClusterState
from bench.fragmentation import FragmentationModel, PodClass, typical_classes
from bench.trace import NodeRow, PodRow
from bench.trace_links import TraceLinkMeter
from bench.trace_policies import PolicyFactory

TARGET_DEMAND = 1.30
READ_AT_DEMAND = 1.00
WINDOW_HALF_PCT = 0.5  # the mean reading's window: arrived demand that rounds to 100 %
NODE_ORDER_SALT = 104_729  # the node order's generator, apart from the arrival order and the policy's


class ReplayProtocol(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    seeded_node_order: bool  # node ranks for ties: a random permutation per seed (else the list order)
    cpu_only_typical: bool  # typical pod shapes drawn from all pods (else GPU pods only)
    mean_reading: bool  # mean over events whose arrived % rounds to 100 (else the first event >= 100 %)
    inflate_within_target: bool  # stop at the first copy that would pass the target (else until >= target)

    def classes(self, pods: Sequence[PodRow]) -> list[PodClass]:
        return typical_classes(pods, include_cpu_only=self.cpu_only_typical)

    def node_order(self, size: int, seed: int) -> np.ndarray | None:
        if not self.seeded_node_order:
            return None
        order: np.ndarray = np.random.default_rng(seed + NODE_ORDER_SALT).permutation(size)
        return order


SIMULATOR = ReplayProtocol(
    name="simulator", seeded_node_order=True, cpu_only_typical=True, mean_reading=True, inflate_within_target=True
)
EARLIER = ReplayProtocol(
    name="earlier", seeded_node_order=False, cpu_only_typical=False, mean_reading=False, inflate_within_target=False
)


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
    multi_gpu_pods: int = 0  # pods placed on 2+ GPUs up to the reading
    link_quality_pct: float = 100.0  # their sets' mean link score, % of the best set free on the node then
    link_optimal_pct: float = 100.0  # share of them on a link-optimal set


def arrival_sequence(
    pods: Sequence[PodRow],
    capacity_milli: int,
    seed: int,
    target: float = TARGET_DEMAND,
    *,
    within_target: bool = False,
) -> list[PodRow]:
    """The trace shuffled by `seed`, extended by uniform draws with replacement to `target` x capacity:
    until the demand reaches it, or (`within_target`) up to the first draw that would pass it."""
    rng = np.random.default_rng(seed)
    sequence = [pods[i] for i in rng.permutation(len(pods))]
    demand = sum(p.gpu_milli_total for p in sequence)
    if not any(p.gpu_milli_total for p in pods):
        raise ValueError("pods: no pod asks for a GPU, the demand can never reach the target")
    while demand < target * capacity_milli:
        extra = pods[int(rng.integers(len(pods)))]
        if within_target and demand + extra.gpu_milli_total > target * capacity_milli:
            break
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
    protocol: ReplayProtocol = SIMULATOR,
) -> ReplayResult:
    """Replay one seed under one policy until the arrived demand reaches `stop_at` x capacity (and past
    the reading window of the mean reading)."""
    gpu_nodes = [n for n in nodes if n.gpus > 0]
    state = ClusterState(gpu_nodes, protocol.node_order(len(gpu_nodes), seed))
    policy = factory(state, classes)
    links = TraceLinkMeter(state)
    rng = np.random.default_rng(seed + 7919)  # the policy's own randomness, apart from the arrival order
    sequence = arrival_sequence(pods, state.capacity_milli, seed, within_target=protocol.inflate_within_target)
    window: list[float] = []  # unallocated % at each event whose arrived % rounds to 100
    stop_pct = max(100.0 * stop_at, 100.0 + WINDOW_HALF_PCT if protocol.mean_reading else 0.0)
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
                if arrived <= READ_AT_DEMAND * state.capacity_milli:
                    links.observe(placement.node, placement.gpus)
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
        if -WINDOW_HALF_PCT <= arrived_pct - 100.0 * READ_AT_DEMAND < WINDOW_HALF_PCT:  # rounds (half up) to 100
            window.append(state.unallocated_gpu_pct())
        if reading is None and arrived >= READ_AT_DEMAND * state.capacity_milli:
            reading = (state.unallocated_gpu_pct(), _fragmented_pct(state, classes))
        if arrived_pct >= stop_pct:
            break
    seconds = time.perf_counter() - start
    if reading is None:
        reading = (state.unallocated_gpu_pct(), _fragmented_pct(state, classes))
    unallocated = float(np.mean(window)) if protocol.mean_reading and window else reading[0]
    return ReplayResult(
        policy=policy.name,
        seed=seed,
        unallocated_pct=unallocated,
        fragmented_pct=reading[1],
        pods_arrived=count,
        pods_dropped=dropped,
        seconds=seconds,
        decisions=decisions,
        curve=tuple(curve),
        multi_gpu_pods=len(links.quality),
        link_quality_pct=links.mean_pct,
        link_optimal_pct=links.optimal_pct,
    )
