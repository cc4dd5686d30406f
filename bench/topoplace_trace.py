"""topoplace's engine as a policy of the trace replay.

Every node choice comes from the real engine (`services.placer.engine.place`).
Calling it over all 1,213 nodes for each of ~8,000 pods would take over an hour
in Python, so the replay uses two exact shortcuts:

- the engine is asked about one node at a time, and its verdict (fits, node
  score, devices) is cached by the node's device state (machine type plus the
  shares held on each device) and the request: the engine is a pure function of
  exactly those, so a cached verdict is the verdict it would give again;
- the fitting nodes are then ranked by the engine's own documented rule
  (higher node score first, ties to the node whose name sorts first).

CPU and memory are not part of the engine's snapshot (the default scheduler's
NodeResourcesFit checks them), so the replay pre-filters nodes on CPU, memory
and GPU model first, as the protocol requires for every policy. CPU-only pods
ask the engine for nothing; they go where the default scheduler would put them
(the node with the most free CPU, NodeResourcesFit LeastAllocated).

`topoplace-frag` asks the engine for its `fragmentation` node policy, with the
trace's typical pod classes as the snapshot's workload (FGD's measure inside
the engine; the engine knows devices only, so unlike the bench's fgd policy it
does not count a class as unable to run for lack of free CPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.cluster import MILLI, ClusterState, Placement
from bench.fragmentation import PodClass
from bench.trace import PodRow
from bench.trace_policies import PolicyFactory
from bench.trace_topology import TraceMachine, trace_machine
from services.placer.engine import Allocation, Mode, NodeState, PodRequest, Snapshot, WorkloadClass, place

DeviceShares = tuple[tuple[int, ...], ...]  # per device: the milli-GPU of each share held on it
NODE_POLICY = "hami.io/node-scheduler-policy"
FRAGMENTATION = "fragmentation"


class EngineVerdict:
    __slots__ = ("fits", "score", "devices")

    def __init__(self, fits: bool, score: float, devices: tuple[int, ...]) -> None:
        self.fits = fits
        self.score = score
        self.devices = devices


def engine_request(pod: PodRow, machine: TraceMachine, uid: str = "pod", node_policy: str = "") -> PodRequest:
    """The NVIDIA resources a trace pod asks for: whole GPUs, or a memory and core share of one."""
    requests = {"nvidia.com/gpu": str(pod.num_gpu)}
    if pod.gpu_milli < MILLI:
        requests["nvidia.com/gpumem"] = str(pod.gpu_milli * machine.memory_per_gpu_mib // MILLI)
        requests["nvidia.com/gpucores"] = str(max(1, pod.gpu_milli // 10))
    annotations = {NODE_POLICY: node_policy} if node_policy else {}
    return PodRequest(uid=uid, requests=requests, annotations=annotations)


def engine_workload(classes: Sequence[PodClass]) -> tuple[WorkloadClass, ...]:
    """The trace's typical pod classes as the engine's workload mix (GPU shape, model, frequency)."""
    return tuple(
        WorkloadClass(gpus=c.num_gpu, milli=c.gpu_milli, weight=c.probability, models=c.gpu_spec)
        for c in classes
        if c.num_gpu > 0 and c.probability > 0
    )


def node_state(name: str, machine: TraceMachine, shares: DeviceShares) -> NodeState:
    allocations = []
    for index, held in enumerate(shares):
        for k, milli in enumerate(held):
            whole = milli >= MILLI
            allocations.append(
                Allocation(
                    pod_uid=f"{name}-{index}-{k}",
                    index=machine.devices[index].index,
                    memory_mib=0 if whole else milli * machine.memory_per_gpu_mib // MILLI,
                    cores=100 if whole else max(1, milli // 10),
                )
            )
    return NodeState(
        name=name,
        machine_type=machine.machine_type,
        devices=machine.devices,
        links=machine.links,
        allocations=tuple(allocations),
    )


class TopoplaceTracePolicy:
    """Node and devices from the engine in the given mode (and, optionally, its fragmentation policy)."""

    def __init__(
        self,
        state: ClusterState,
        classes: Sequence[PodClass],
        mode: Mode = Mode.DEFAULT,
        fragmentation: bool = False,
    ) -> None:
        self.state = state
        self.mode = mode
        self.name = "topoplace" if mode is Mode.DEFAULT else f"topoplace-{mode.value}"
        self.node_policy = ""
        self.workload: tuple[WorkloadClass, ...] = ()
        if fragmentation:
            self.name = "topoplace-frag"
            self.node_policy = FRAGMENTATION
            self.workload = engine_workload(classes)
        self.machines = [
            trace_machine(state.models[m], int(c)) for m, c in zip(state.model, state.gpu_count, strict=True)
        ]
        self.shares: list[list[list[int]]] = [[[] for _ in range(int(c))] for c in state.gpu_count]
        self.keys: list[tuple[str, DeviceShares]] = [self._key(i) for i in range(state.size)]
        self.cache: dict[tuple[tuple[str, DeviceShares], tuple[int, int]], EngineVerdict] = {}
        self.engine_calls = 0
        self.engine_refusals = 0

    def _key(self, node: int) -> tuple[str, DeviceShares]:
        return (self.machines[node].machine_type, tuple(tuple(sorted(s)) for s in self.shares[node]))

    def _verdict(self, node: int, pod: PodRow) -> EngineVerdict:
        key = (self.keys[node], (pod.num_gpu, pod.gpu_milli))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        machine = self.machines[node]
        shares = key[0][1]
        snapshot = Snapshot(nodes=(node_state("n", machine, shares),), workload=self.workload)
        decision = place(snapshot, engine_request(pod, machine, node_policy=self.node_policy), self.mode)
        self.engine_calls += 1
        if decision.node is None:
            verdict = EngineVerdict(False, 0.0, ())
        else:
            position = {d.index: i for i, d in enumerate(machine.devices)}
            verdict = EngineVerdict(True, decision.score, tuple(position[d.index] for d in decision.devices))
        self.cache[key] = verdict
        return verdict

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement | None:
        if pod.num_gpu == 0:
            node = int(candidates[np.argmax(self.state.cpu_free[candidates])])
            return Placement(node=node, gpus=())
        best: tuple[float, int] | None = None
        best_devices: tuple[int, ...] = ()
        for node in candidates:  # index order = node-name order, so the first of equal scores wins
            verdict = self._verdict(int(node), pod)
            if verdict.fits and (best is None or verdict.score > best[0]):
                best = (verdict.score, int(node))
                best_devices = verdict.devices
        if best is None:
            self.engine_refusals += 1
            return None
        return Placement(node=best[1], gpus=best_devices)

    def placed(self, pod: PodRow, placement: Placement) -> None:
        for g in placement.gpus:
            self.shares[placement.node][g].append(pod.gpu_milli)
        self.keys[placement.node] = self._key(placement.node)


def topoplace_factory(mode: Mode, fragmentation: bool = False) -> PolicyFactory:
    def make(state: ClusterState, classes: Sequence[PodClass]) -> TopoplaceTracePolicy:
        return TopoplaceTracePolicy(state, classes, mode, fragmentation)

    return make
