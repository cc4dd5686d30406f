"""Nodes built from the pods running on them, for the preemption tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache

from engine_builders import gpu, matrix_links

from engine import Allocation, NodeState, PodRequest
from engine.decide.preempt import Preemptor, RunningPod
from schemas.kube import HostPort, Taint
from schemas.topology import Device, Link, PcieLevel

QUADS = ((0, 1, 2, 3), (4, 5, 6, 7))


@cache
def two_quads() -> tuple[tuple[Device, ...], tuple[Link, ...]]:
    """Eight GPUs in two NVLink quads (NV2 inside a quad), SYS between them.

    One tuple for every node, as a node's devices stay one tuple across its updates: the engine
    remembers anonymised devices by identity, and fresh tuples per node per example would fill that
    memory to its bound over a long property run."""
    pairs: dict[tuple[int, int], tuple[int, PcieLevel | None]] = {}
    for quad in QUADS:
        for i, a in enumerate(quad):
            for b in quad[i + 1 :]:
                pairs[(a, b)] = (2, None)
    for a in QUADS[0]:
        for b in QUADS[1]:
            pairs[(a, b)] = (0, PcieLevel.SYS)
    return tuple(gpu(i) for i in range(8)), matrix_links(pairs)


def running(name: str, node: str, *, prio: int = 0, start: float | None = None, cpu: str = "",
            gpus: Sequence[int] = (), labels: Mapping[str, str] | None = None, port: int = 0,
            terminating: bool = False) -> RunningPod:  # fmt: skip
    requests = {"cpu": cpu} if cpu else {}
    if gpus:
        requests["nvidia.com/gpu"] = str(len(gpus))
    return RunningPod(
        name=name,
        node=node,
        holder=f"uid-{name}",
        priority=prio,
        start_time=start,
        labels=dict(labels or {}),
        requests=requests,
        host_ports=(HostPort(port=port),) if port else (),
        terminating_by_preemption=terminating,
    )


def held_gpus(pods: Iterable[RunningPod], gpus: Mapping[str, Sequence[int]]) -> tuple[Allocation, ...]:
    return tuple(Allocation(pod_uid=p.holder, index=i) for p in pods for i in gpus.get(p.name, ()))


def built_node(name: str, pods: Sequence[RunningPod], *, cpu: str = "4",
               gpus: Mapping[str, Sequence[int]] | None = None, devices: bool = False,
               taints: tuple[Taint, ...] = (), labels: Mapping[str, str] | None = None,
               unschedulable: bool = False) -> NodeState:  # fmt: skip
    """The node with `pods` running on it: their cpu summed, their count, ports and devices (`gpus`: by pod)."""
    mine = [p for p in pods if p.node == name]
    total = sum(int(p.requests.get("cpu", "0")) for p in mine)
    gpu_count = sum(int(p.requests.get("nvidia.com/gpu", "0")) for p in mine)
    allocatable = {"cpu": cpu, "pods": "10"}
    requested = {"cpu": str(total)} if total else {}
    device_list: tuple[Device, ...] = ()
    links: tuple[Link, ...] = ()
    if devices:
        device_list, links = two_quads()
        allocatable["nvidia.com/gpu"] = "8"
        if gpu_count:
            requested["nvidia.com/gpu"] = str(gpu_count)
    return NodeState(
        name=name,
        devices=device_list,
        links=links,
        labels=dict(labels or {}),
        taints=taints,
        unschedulable=unschedulable,
        allocatable=allocatable,
        requested=requested,
        pods=len(mine),
        host_ports=tuple(hp for p in mine for hp in p.host_ports),
        allocations=held_gpus(mine, gpus or {}),
    )


def preemptor(prio: int, *, cpu: str = "", gpus: int = 0, port: int = 0, policy: str = "PreemptLowerPriority",
              nominated: str = "", node_selector: Mapping[str, str] | None = None) -> Preemptor:  # fmt: skip
    requests = {"cpu": cpu} if cpu else {}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    request = PodRequest(
        uid="uid-new",
        name="new",
        requests=requests,
        host_ports=(HostPort(port=port),) if port else (),
        node_selector=dict(node_selector or {}),
    )
    return Preemptor(request=request, priority=prio, policy=policy, nominated_node=nominated)
