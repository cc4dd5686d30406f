"""topoplace's engine as a policy of the trace replay.

Every node choice comes from the real engine (`Engine.place`).
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

`topoplace-frag` (`EngineTracePolicy`) is the engine's `fragmentation` node
policy with no shortcut: the cluster is an engine index that reads each node's
CPU, and every pod, CPU-only pods included, is one real `place_in` decision
over all nodes (the policy's cost per decision is the engine's own).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.cluster import MILLI, ClusterState, Placement
from bench.fragmentation import PodClass
from bench.trace import PodRow
from bench.trace_policies import PolicyFactory
from bench.trace_topology import TraceMachine, trace_machine
from engine import (
    Allocation,
    Engine,
    Mode,
    NodeState,
    PodRequest,
    Snapshot,
    WorkloadClass,
)

DeviceShares = tuple[tuple[int, ...], ...]  # per device: the milli-GPU of each share held on it
GPU = "nvidia.com/gpu"
SPLIT_COUNT = 10  # nvidia.com/gpu a node reports per GPU (HAMi's deviceSplitCount)
POD_SLOTS = 1_000  # the nodes' allocatable pods: the trace never limits pods per node
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


def engine_workload(classes: Sequence[PodClass], *, with_cpu: bool = False) -> tuple[WorkloadClass, ...]:
    """The trace's typical pod classes as the engine's workload mix (GPU shape, model, frequency);
    `with_cpu`: with each class's CPU, and the CPU-only classes too."""
    return tuple(
        WorkloadClass(
            gpus=c.num_gpu,
            milli=c.gpu_milli if c.num_gpu else MILLI,
            weight=c.probability,
            models=c.gpu_spec,
            cpu_milli=c.cpu_milli if with_cpu else 0,
        )
        for c in classes
        if (c.num_gpu > 0 or with_cpu) and c.probability > 0
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
    """Node and devices from the engine in the given mode, its default node policy."""

    def __init__(self, state: ClusterState, classes: Sequence[PodClass], mode: Mode = Mode.DEFAULT) -> None:
        self.state = state
        self.mode = mode
        self.engine = Engine()  # its memo tables last the replay
        self.name = "topoplace" if mode is Mode.DEFAULT else f"topoplace-{mode.value}"
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
        snapshot = Snapshot(nodes=(node_state("n", machine, shares),))
        decision = self.engine.place(snapshot, engine_request(pod, machine), self.mode)
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


def topoplace_factory(mode: Mode) -> PolicyFactory:
    def make(state: ClusterState, classes: Sequence[PodClass]) -> TopoplaceTracePolicy:
        return TopoplaceTracePolicy(state, classes, mode)

    return make


class EngineTracePolicy:
    """The engine's `fragmentation` node policy, every decision a real one over the whole cluster.

    The replay's cluster lives in an engine index that reads each node's CPU (`Engine.new_index(cpu=True)`);
    every pod, CPU-only pods included, is one `place_in` call with its CPU, memory and GPU request,
    and the engine filters nodes itself (CPU, memory, GPU model, pod slots). Node names carry the
    seed's node rank as a prefix, so the engine's tie rule (the first name) is the protocol's fixed
    random node order. The workload is the protocol's typical classes, CPU-only classes included.
    """

    name = "topoplace-frag"

    def __init__(self, state: ClusterState, classes: Sequence[PodClass], engine: Engine | None = None) -> None:
        """`engine`: the engine to ask (a new one when None; tests pass one without its memo tables)."""
        self.state = state
        self.workload = engine_workload(classes, with_cpu=True)
        self.machines = [
            trace_machine(state.models[m], int(c)) for m, c in zip(state.model, state.gpu_count, strict=True)
        ]
        width = len(str(state.size))
        self.names = [f"{int(rank):0{width}d}-{name}" for rank, name in zip(state.node_rank, state.names, strict=True)]
        self.position = {name: i for i, name in enumerate(self.names)}
        self.allocations: list[list[Allocation]] = [[] for _ in range(state.size)]
        self.gpu_slots = [0] * state.size  # nvidia.com/gpu requested on the node
        self.pods = [0] * state.size
        self.engine = engine if engine is not None else Engine()
        self.index = self.engine.new_index(cpu=True)
        for i in range(state.size):
            self.index.upsert(self._node(i))
        self.count = 0
        self.engine_refusals = 0

    def _node(self, i: int) -> NodeState:
        machine = self.machines[i]
        s = self.state
        return NodeState(
            name=self.names[i],
            machine_type=machine.machine_type,
            devices=machine.devices,
            links=machine.links,
            allocatable={
                "cpu": f"{int(s.cpu_cap[i])}m",
                "memory": f"{int(s.mem_cap[i])}Mi",
                "pods": str(POD_SLOTS),
                GPU: str(int(s.gpu_count[i]) * SPLIT_COUNT),
            },
            requested={
                "cpu": f"{int(s.cpu_cap[i] - s.cpu_free[i])}m",
                "memory": f"{int(s.mem_cap[i] - s.mem_free[i])}Mi",
                GPU: str(self.gpu_slots[i]),
            },
            pods=self.pods[i],
            allocations=tuple(self.allocations[i]),
        )

    def _request(self, pod: PodRow) -> PodRequest:
        requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
        annotations = {NODE_POLICY: FRAGMENTATION}
        if pod.num_gpu:
            # Nodes differ in GPU memory: the share is asked as a percentage of the device's memory,
            # exact for the trace's whole-percent shares, plus the same share of its cores.
            requests[GPU] = str(pod.num_gpu)
            if pod.gpu_milli < MILLI:
                requests["nvidia.com/gpumem-percentage"] = str(max(1, pod.gpu_milli // 10))
                requests["nvidia.com/gpucores"] = str(max(1, pod.gpu_milli // 10))
            if pod.gpu_spec:
                annotations["nvidia.com/use-gputype"] = ",".join(pod.gpu_spec)
        self.count += 1
        return PodRequest(uid=f"pod-{self.count}", name=pod.name, requests=requests, annotations=annotations)

    def choose(self, pod: PodRow, candidates: np.ndarray, rng: np.random.Generator) -> Placement | None:
        decision = self.engine.place_in(self.index, self._request(pod), workload=self.workload)
        if decision.node is None:
            self.engine_refusals += 1
            return None
        node = self.position[decision.node]
        position = {d.index: i for i, d in enumerate(self.machines[node].devices)}
        return Placement(node=node, gpus=tuple(position[d.index] for d in decision.devices))

    def placed(self, pod: PodRow, placement: Placement) -> None:
        node = placement.node
        machine = self.machines[node]
        for g in placement.gpus:
            whole = pod.gpu_milli >= MILLI
            share = max(1, pod.gpu_milli // 10)
            self.allocations[node].append(
                Allocation(
                    pod_uid=f"pod-{self.count}",
                    index=machine.devices[g].index,
                    memory_mib=0 if whole else machine.memory_per_gpu_mib * share // 100,
                    cores=100 if whole else share,
                )
            )
        self.gpu_slots[node] += pod.num_gpu
        self.pods[node] += 1
        self.index.upsert(self._node(node))
