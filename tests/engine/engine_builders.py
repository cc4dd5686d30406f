"""Nodes, devices and pods for the engine's scenario tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from schemas.topology import Device, Link, PcieLevel, Vendor
from services.collector.topology_files import load_topology
from services.placer.engine import Allocation, NodeState, PodRequest, Snapshot


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


# --- synthetic nodes (the same shapes bench/search_speed.py times) ---------------------------

# DGX-1 V100 hybrid cube-mesh: two fully linked quads, plus one link between each GPU i and i+4.
DGX1_NVLINKS: dict[tuple[int, int], int] = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}  # fmt: skip


def dgx1_boards(boards: int, name: str = "dgx1") -> NodeState:
    devices = [gpu(b * 8 + i, numa=(b * 8 + i) // 4) for b in range(boards) for i in range(8)]
    links: list[Link] = []
    for a in range(len(devices)):
        for c in range(a + 1, len(devices)):
            nv = DGX1_NVLINKS.get((a % 8, c % 8), 0) if a // 8 == c // 8 else 0
            links.extend(both(a, c, nvlinks=nv, pcie=None if nv else PcieLevel.SYS))
    return node(name, devices, links)


def pcie_tree_16(name: str = "pcie16") -> NodeState:
    """2 sockets x 2 host bridges x 2 switches x 2 GPUs; GPUs under one switch NVLink-bridged (NV4)."""
    links: list[Link] = []
    for a in range(16):
        for c in range(a + 1, 16):
            if a // 2 == c // 2:
                links.extend(both(a, c, nvlinks=4, pcie=PcieLevel.PIX))
            elif a // 4 == c // 4:
                links.extend(both(a, c, pcie=PcieLevel.PXB))
            elif a // 8 == c // 8:
                links.extend(both(a, c, pcie=PcieLevel.NODE))
            else:
                links.extend(both(a, c, pcie=PcieLevel.SYS))
    return node(name, [gpu(i, numa=i // 8) for i in range(16)], links)


def nvl72(name: str = "nvl72") -> NodeState:
    return node(name, [gpu(i, numa=i // 36, nvswitch=18) for i in range(72)])
