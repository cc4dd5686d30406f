"""Nodes, devices and pods for the engine's scenario tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

# The synthetic nodes bench/search_speed.py times, re-exported for the engine tests.
from bench.search_speed import DGX1_NVLINKS as DGX1_NVLINKS
from bench.search_speed import dgx1_boards as dgx1_boards
from bench.search_speed import nvl72 as nvl72
from bench.search_speed import pcie_tree_16 as pcie_tree_16
from engine import Allocation, Decision, Engine, Mode, NodeState, PodRequest, Snapshot
from schemas.topology import Device, Link, PcieLevel, Vendor
from services.collector.node.topology_files import load_topology


def gpu(index: int, *, numa: int | None = 0, memory: int = 81920, model: str = "NVIDIA H100 80GB HBM3",
        healthy: bool = True, nvswitch: int = 0, uuid: str | None = None) -> Device:  # fmt: skip
    return Device(
        index=index,
        uuid=uuid if uuid is not None else f"GPU-{index:04d}",
        vendor=Vendor.NVIDIA,
        model=model,
        memory_mib=memory,
        numa_node=numa,
        nvswitch_links=nvswitch,
        healthy=healthy,
    )


def both(a: int, b: int, *, nvlinks: int = 0, pcie: PcieLevel | None = None) -> tuple[Link, Link]:
    return (Link(src=a, dst=b, nvlinks=nvlinks, pcie=pcie), Link(src=b, dst=a, nvlinks=nvlinks, pcie=pcie))


def matrix_links(scores: Mapping[tuple[int, int], tuple[int, PcieLevel | None]]) -> tuple[Link, ...]:
    """Symmetric links from {(a, b): (nvlinks, pcie)}."""
    out: list[Link] = []
    for (a, b), (nv, pcie) in sorted(scores.items()):
        out.extend(both(a, b, nvlinks=nv, pcie=pcie))
    return tuple(out)


def node(name: str, devices: Iterable[Device], links: Iterable[Link] = (), *, busy: Iterable[int] = (),
         allocations: Iterable[Allocation] = (), ready: bool = True, unschedulable: bool = False,
         machine_type: str = "test") -> NodeState:  # fmt: skip
    allocs = tuple(allocations) + tuple(Allocation(pod_uid=f"busy-{i}", index=i) for i in busy)
    return NodeState(
        name=name,
        machine_type=machine_type,
        devices=tuple(devices),
        links=tuple(links),
        ready=ready,
        unschedulable=unschedulable,
        allocations=allocs,
    )


def fixture_node(name: str, fixture: str, *, busy: Iterable[int] = (), **kwargs: object) -> NodeState:
    topology = load_topology(fixture, node=name)
    built = node(name, topology.devices, topology.links, busy=busy, machine_type=topology.machine_type)
    return msgspec.structs.replace(built, **kwargs) if kwargs else built


def pcie_box(name: str, levels: Mapping[tuple[int, int], PcieLevel], n: int, **kwargs: object) -> NodeState:
    links = matrix_links({pair: (0, level) for pair, level in levels.items()})
    return node(name, [gpu(i) for i in range(n)], links, **kwargs)  # type: ignore[arg-type]


def pod(count: int | None = None, *, uid: str = "pod-1", policy: str | None = None, node_policy: str | None = None,
        annotations: Mapping[str, str] | None = None, **resources: str) -> PodRequest:  # fmt: skip
    requests = {"nvidia.com/" + k.replace("_", "-"): v for k, v in resources.items()}
    if count is not None:
        requests["nvidia.com/gpu"] = str(count)
    ann = dict(annotations or {})
    if policy is not None:
        ann["hami.io/gpu-scheduler-policy"] = policy
    if node_policy is not None:
        ann["hami.io/node-scheduler-policy"] = node_policy
    return PodRequest(uid=uid, name=uid, requests=requests, annotations=ann)


def snapshot(*nodes: NodeState) -> Snapshot:
    return Snapshot(nodes=tuple(nodes))


def indices(decision_devices: Iterable[object]) -> list[int]:
    return [d.index for d in decision_devices]  # type: ignore[attr-defined]


ENGINE = Engine()  # shared by the engine tests, as a placer shares its engine between decisions


def place(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT) -> Decision:
    """The engine's decision with every other node explained (what these tests read)."""
    return ENGINE.place(snapshot, request, mode, explain=True)
