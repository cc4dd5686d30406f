"""Builders for hand-made trace clusters (imported by the tests of this folder)."""

from __future__ import annotations

from collections.abc import Sequence

from bench.cluster import ClusterState, Placement
from bench.trace import NodeRow, PodRow


def node(name: str, gpus: int = 2, model: str = "T4", cpu: int = 32000, memory: int = 65536) -> NodeRow:
    return NodeRow(name=name, cpu_milli=cpu, memory_mib=memory, gpus=gpus, model=model)


def pod(
    name: str = "p",
    num_gpu: int = 1,
    gpu_milli: int = 1000,
    cpu: int = 1000,
    memory: int = 1024,
    spec: tuple[str, ...] = (),
) -> PodRow:
    return PodRow(name=name, cpu_milli=cpu, memory_mib=memory, num_gpu=num_gpu, gpu_milli=gpu_milli, gpu_spec=spec)


def cluster(
    nodes: Sequence[NodeRow], held: dict[int, Sequence[int]] | None = None, cpu_used: dict[int, int] | None = None
) -> ClusterState:
    """A state where node i already holds shares `held[i]` (milli-GPU per GPU, in GPU order)."""
    state = ClusterState(nodes)
    for i, shares in (held or {}).items():
        for g, milli in enumerate(shares):
            if milli:
                state.place(pod(f"held-{i}-{g}", 1, milli, cpu=0, memory=0), Placement(node=i, gpus=(g,)))
    for i, cpu in (cpu_used or {}).items():
        state.cpu_free[i] -= cpu
    return state
