"""Full clusters for the preemption benchmark: every node packed with pods of mixed priority.

CPU clusters: nodes of 32 CPUs, each running four 8-CPU pods of priority 0, 10 or 100 with
random start times. GPU clusters: NVIDIA DGX H100 nodes (8 GPUs), each running pods of one,
two or four GPUs that hold all eight. The preemptor asks for what no node has free.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import msgspec

from engine import Allocation, NodeState, PodRequest, Snapshot
from engine.cluster.network import NetworkTree
from engine.cluster.network.index import Draft
from engine.decide.gang import GangRequest
from engine.decide.preempt import Preemptor, RunningPod
from schemas.events import NetworkConstraint, TopologyMode
from services.collector.node.topology_files import load_topology

PRIORITIES = (0, 10, 100)
CPU_NODE = 32
CPU_POD = 8
GPU_MACHINE = "dgx-h100"
GPU_SIZES = (1, 2, 4)


class PackedCluster(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot whose every node is full, and the pods running on it."""

    snapshot: Snapshot
    running: tuple[RunningPod, ...]


def _pod(rng: random.Random, node: str, i: int, requests: dict[str, str]) -> RunningPod:
    return RunningPod(
        name=f"{node}-p{i}",
        node=node,
        holder=f"uid-{node}-p{i}",
        priority=rng.choice(PRIORITIES),
        start_time=float(rng.randrange(1_000_000)),
        labels={"app": f"app-{rng.randrange(20)}"},
        requests=requests,
    )


def cpu_cluster(nodes: int, seed: int = 0) -> PackedCluster:
    """`nodes` nodes of 32 CPUs, each full with four 8-CPU pods."""
    rng = random.Random(seed)
    states: list[NodeState] = []
    pods: list[RunningPod] = []
    for n in range(nodes):
        name = f"cpu-{n:05d}"
        mine = [_pod(rng, name, i, {"cpu": str(CPU_POD)}) for i in range(CPU_NODE // CPU_POD)]
        pods.extend(mine)
        states.append(
            NodeState(
                name=name,
                allocatable={"cpu": str(CPU_NODE), "pods": "110"},
                requested={"cpu": str(CPU_NODE)},
                pods=len(mine),
            )
        )
    return PackedCluster(snapshot=Snapshot(nodes=tuple(states)), running=tuple(pods))


def gpu_cluster(nodes: int, seed: int = 0) -> PackedCluster:
    """`nodes` DGX H100 nodes, each with all eight GPUs held by pods of 1, 2 or 4 GPUs."""
    rng = random.Random(seed)
    topology = load_topology(GPU_MACHINE)
    states: list[NodeState] = []
    pods: list[RunningPod] = []
    for n in range(nodes):
        name = f"gpu-{n:05d}"
        free = list(range(8))
        held: list[Allocation] = []
        mine: list[RunningPod] = []
        while free:
            size = min(rng.choice(GPU_SIZES), len(free))
            pod = _pod(rng, name, len(mine), {"cpu": "1", "nvidia.com/gpu": str(size)})
            devices, free = free[:size], free[size:]
            held.extend(Allocation(pod_uid=pod.holder, index=d) for d in devices)
            mine.append(pod)
        pods.extend(mine)
        states.append(
            NodeState(
                name=name,
                machine_type=topology.machine_type,
                devices=topology.devices,
                links=topology.links,
                allocatable={"cpu": "128", "nvidia.com/gpu": "8", "pods": "110"},
                requested={"cpu": str(len(mine)), "nvidia.com/gpu": "8"},
                pods=len(mine),
                allocations=tuple(held),
            )
        )
    return PackedCluster(snapshot=Snapshot(nodes=tuple(states)), running=tuple(pods))


def cpu_preemptor(j: int, priority: int = 1000) -> Preemptor:
    """The j-th preemptor of a run: 4, 8 or 16 CPUs in turn."""
    cpu = (4, 8, 16)[j % 3]
    return Preemptor(request=PodRequest(uid=f"pre-{j}", name=f"pre-{j}", requests={"cpu": str(cpu)}), priority=priority)


def gpu_preemptor(j: int, priority: int = 1000) -> Preemptor:
    """The j-th preemptor of a run: 1, 2, 4 or 8 GPUs in turn."""
    count = (1, 2, 4, 8)[j % 4]
    request = PodRequest(uid=f"pre-{j}", name=f"pre-{j}", requests={"cpu": "1", "nvidia.com/gpu": str(count)})
    return Preemptor(request=request, priority=priority)


def leaf_spine_tree(names: Sequence[str], leaf: int = 8, spine: int = 16) -> NetworkTree:
    """Leaf switches of `leaf` nodes (tier 1) under spines of `spine` leaves (tier 2), in name order."""
    draft = Draft()
    for i, name in enumerate(names):
        leaf_name, spine_name = f"leaf-{i // leaf:04d}", f"spine-{i // (leaf * spine):03d}"
        draft.node_parent[name] = leaf_name
        draft.nodes.append(name)
        draft.tier[leaf_name], draft.tier[spine_name] = 1, 2
        draft.hypernode_parent[leaf_name] = spine_name
    return NetworkTree(draft, {"leaf": 1, "spine": 2})


def gpu_gang(members: int, priority_tier: int = 2) -> GangRequest:
    """`members` pending pods of 8 GPUs each, hard up to tier `priority_tier` (one spine)."""
    pods = tuple(
        PodRequest(uid=f"gang-{i}", name=f"gang-{i:03d}", requests={"cpu": "1", "nvidia.com/gpu": "8"})
        for i in range(members)
    )
    network = NetworkConstraint(mode=TopologyMode.HARD, highest_tier=priority_tier)
    return GangRequest(name="bench/gang", min_member=members, network=network, pods=pods)
