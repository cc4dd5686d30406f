"""Realistic GPU nodes for the scale benchmarks: every node unique, as a real cluster reports them.

What makes them realistic (and what makes them hard for memo tables): each node
has its own name, its own `kubernetes.io/hostname` label and zone, rack and
GPU-feature-discovery labels, its own GPU UUIDs, its own mix of held GPUs
(whole GPUs and a few memory shares), and allocatable / requested cpu, memory,
pods and `nvidia.com/gpu`, so kube-scheduler's node rules run on every node
looked at. All nodes carry the usual `nvidia.com/gpu=present:NoSchedule` taint
and every pod here tolerates it; a few nodes are cordoned or not ready.

Resources are sized so that a node whose GPUs fit a pod also has the cpu,
memory and pod slots for it: the node rules run but never decide alone, which
keeps the engine's answers comparable with the reference loop (it knows only
readiness and cordon of the node rules).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

import msgspec

from engine import Allocation, Decision, NodeState, PodRequest
from schemas.kube import Taint, Toleration
from schemas.topology import Device, Link
from services.collector.node.topology_files import fixture_node_labels, load_topology

# The fixture machines with 8 GPUs: DGX H100 (NVSwitch), DGX-1 (hybrid cube mesh), a 2-socket PCIe box.
MACHINES = ("dgx-h100", "dgx1-v100", "pcie-8gpu-2socket")
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
GPU_TOLERATION = Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
ZONES = ("zone-a", "zone-b", "zone-c")
NODES_PER_RACK = 4

# Per machine: allocatable cpu (cores) and memory (GiB), as the kubelet reports them after reservations.
ALLOCATABLE = {"dgx-h100": (220, 1950), "dgx1-v100": (78, 500), "pcie-8gpu-2socket": (126, 1000)}
SYSTEM_CPU, SYSTEM_MEMORY_GI, SYSTEM_PODS = 4, 8, 8  # daemon sets on every node
CPU_PER_GPU, MEMORY_GI_PER_GPU = 6, 40  # what a GPU pod asks beside each GPU
SHARE_MEMORY_MIB, SHARE_CORES, SHARE_CPU, SHARE_MEMORY_GI = 20_000, 30, 1, 8
# HAMi reports devices x deviceSplitCount (10) as the node's nvidia.com/gpu.
GPU_SLOTS_PER_DEVICE = 10


class Topology(msgspec.Struct, frozen=True, kw_only=True):
    machine_type: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    labels: dict[str, str]


def topologies() -> dict[str, Topology]:
    out = {}
    for machine in MACHINES:
        topo = load_topology(machine)
        out[machine] = Topology(
            machine_type=topo.machine_type, devices=topo.devices, links=topo.links, labels=fixture_node_labels(machine)
        )
    return out


def node_name(i: int) -> str:
    return f"gpu-{i:05d}"


def realistic_nodes(
    count: int,
    seed: int = 0,
    *,
    idle: float = 0.1,
    busy: float = 0.5,
    share: float = 0.15,
    idle_by_block: Sequence[tuple[int, float]] = (),
) -> list[NodeState]:
    """`count` unique nodes cycling the 8-GPU fixture machines.

    A node is entirely idle with probability `idle`; on the others each GPU is held whole with
    probability `busy`, and on a `share` fraction of them one free GPU carries one or two memory
    shares. `idle_by_block` = ((block size, idle), ...) cycled over consecutive blocks of nodes
    overrides `idle`, so that some parts of a cluster are fuller than others."""
    rng = random.Random(seed)
    topos = topologies()
    nodes = []
    blocks = [level for size, level in idle_by_block for _ in range(size)]
    for i in range(count):
        level = blocks[i % len(blocks)] if blocks else idle
        nodes.append(_node(rng, i, topos[MACHINES[i % len(MACHINES)]], level, busy, share))
    return nodes


def _node(rng: random.Random, i: int, topo: Topology, idle: float, busy: float, share: float) -> NodeState:
    name = node_name(i)
    devices = tuple(msgspec.structs.replace(d, uuid=f"GPU-{uuid.UUID(int=rng.getrandbits(128))}") for d in topo.devices)
    allocations: list[Allocation] = []
    vacant = rng.random() < idle
    held = [] if vacant else [d.index for d in devices if rng.random() < busy]
    for n, index in enumerate(held):
        allocations.append(Allocation(pod_uid=f"{name}-held-{n}", index=index))
    free = [d.index for d in devices if d.index not in held]
    if free and not vacant and rng.random() < share:
        for n in range(rng.choice((1, 2))):
            allocations.append(
                Allocation(pod_uid=f"{name}-share-{n}", index=free[0], memory_mib=SHARE_MEMORY_MIB, cores=SHARE_CORES)
            )
    cpu, memory_gi = ALLOCATABLE[topo.machine_type]
    node = NodeState(
        name=name,
        machine_type=topo.machine_type,
        devices=devices,
        links=topo.links,
        labels={
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": topo.machine_type,
            "topology.kubernetes.io/region": "region-1",
            "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
            "topology.example.com/rack": f"rack-{i // NODES_PER_RACK:04d}",
            "nvidia.com/gpu.present": "true",
            **topo.labels,
        },
        taints=(GPU_TAINT,),
        ready=rng.random() > 0.01,
        unschedulable=rng.random() < 0.02,
        allocatable={
            "cpu": str(cpu),
            "memory": f"{memory_gi}Gi",
            "pods": "110",
            "nvidia.com/gpu": str(GPU_SLOTS_PER_DEVICE * len(devices)),
        },
        allocations=tuple(allocations),
    )
    return _with_requested(node)


def _with_requested(node: NodeState) -> NodeState:
    """`requested` and `pods` as the node's holders and daemon sets add them up."""
    whole = sum(1 for a in node.allocations if a.memory_mib == 0)
    shares = len(node.allocations) - whole
    holders = len({a.pod_uid for a in node.allocations})
    cpu = SYSTEM_CPU + CPU_PER_GPU * whole + SHARE_CPU * shares
    memory = SYSTEM_MEMORY_GI + MEMORY_GI_PER_GPU * whole + SHARE_MEMORY_GI * shares
    requested = {"cpu": str(cpu), "memory": f"{memory}Gi", "nvidia.com/gpu": str(whole + shares)}
    return msgspec.structs.replace(node, requested=requested, pods=SYSTEM_PODS + holders)


def gpu_pod(uid: str, gpus: int, *, shared: bool = False, name: str = "") -> PodRequest:
    """A pod of `gpus` whole GPUs (or one memory share), with the cpu and memory that go with them."""
    if shared:
        requests = {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": str(SHARE_MEMORY_MIB),
            "nvidia.com/gpucores": str(SHARE_CORES),
            "cpu": str(SHARE_CPU),
            "memory": f"{SHARE_MEMORY_GI}Gi",
        }
    else:
        requests = {
            "nvidia.com/gpu": str(gpus),
            "cpu": str(CPU_PER_GPU * gpus),
            "memory": f"{MEMORY_GI_PER_GPU * gpus}Gi",
        }
    return PodRequest(uid=uid, name=name or uid, requests=requests, tolerations=(GPU_TOLERATION,))


def random_pod(rng: random.Random, uid: str) -> PodRequest:
    """1, 2, 4 or 8 whole GPUs, or (one pod in ten) a memory share of one GPU."""
    if rng.random() < 0.1:
        return gpu_pod(uid, 1, shared=True)
    return gpu_pod(uid, rng.choice((1, 1, 2, 2, 4, 8)))


def with_pod(node: NodeState, decision: Decision, uid: str) -> NodeState:
    """The node once the decision's pod holds its devices (as the placer assumes it)."""
    added = tuple(
        Allocation(pod_uid=uid, index=d.index, memory_mib=d.memory_mib, cores=d.cores) for d in decision.devices
    )
    return _with_requested(msgspec.structs.replace(node, allocations=node.allocations + added))


def without_pod(node: NodeState, uid: str) -> NodeState:
    """The node once the pod is gone."""
    kept = tuple(a for a in node.allocations if a.pod_uid != uid)
    return _with_requested(msgspec.structs.replace(node, allocations=kept))
