"""Engine speed: decisions per second and per-decision latency at growing cluster sizes.

Clusters mix the NVIDIA fixture machines (dgx-h100, dgx1-v100, pcie-8gpu-2socket,
pcie-4gpu) with about half of the GPUs already held, so the device search and
the ranking have work to do. Requests are 1, 2, 4 or 8 whole GPUs in turn.
Each decision is one call of `Engine.place` over the whole snapshot.
"""

from __future__ import annotations

import time

import msgspec
import numpy as np

from engine import Allocation, Engine, Mode, NodeState, PodRequest, Snapshot
from services.collector.node.topology_files import load_topology

SPEED_MACHINES = ("dgx-h100", "dgx1-v100", "pcie-8gpu-2socket", "pcie-4gpu")
REQUEST_SIZES = (1, 2, 4, 8)


class SpeedRun(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    mode: str
    decisions: int
    latencies_ms: tuple[float, ...]

    @property
    def decisions_per_s(self) -> float:
        return 1000.0 * len(self.latencies_ms) / sum(self.latencies_ms)

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))


def speed_cluster(nodes: int, seed: int = 0, busy: float = 0.5) -> Snapshot:
    rng = np.random.default_rng(seed)
    topologies = {m: load_topology(m) for m in SPEED_MACHINES}
    states = []
    for i in range(nodes):
        machine = SPEED_MACHINES[i % len(SPEED_MACHINES)]
        topo = topologies[machine]
        held = [d.index for d in topo.devices if rng.random() < busy]
        states.append(
            NodeState(
                name=f"node-{i:05d}",
                machine_type=topo.machine_type,
                devices=topo.devices,
                links=topo.links,
                allocations=tuple(Allocation(pod_uid=f"held-{i}-{d}", index=d) for d in held),
            )
        )
    return Snapshot(nodes=tuple(states))


def measure(nodes: int, decisions: int, mode: Mode = Mode.DEFAULT) -> SpeedRun:
    snapshot = speed_cluster(nodes)
    placer = Engine()  # one for the run: its memo tables carry over between decisions, as a placer's
    latencies = []
    for j in range(decisions):
        request = PodRequest(uid=f"speed-{j}", requests={"nvidia.com/gpu": str(REQUEST_SIZES[j % len(REQUEST_SIZES)])})
        t0 = time.perf_counter()
        placer.place(snapshot, request, mode)
        latencies.append(1000.0 * (time.perf_counter() - t0))
    return SpeedRun(nodes=nodes, mode=mode.value, decisions=decisions, latencies_ms=tuple(latencies))
