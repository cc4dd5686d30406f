"""Clusters of 8-GPU nodes (two NVLink quads) under Volcano's documented tree, for gang preemption."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from engine_builders import ENGINE
from network_builders import volcano_example
from preempt_builders import built_node

from engine import NodeState, PodRequest
from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree, build_tree
from engine.decide.gang import GangRequest
from engine.decide.preempt import RunningPod
from engine.decide.preempt.gang import GangPreemption
from schemas.events import NetworkConstraint, TopologyMode

NODES = tuple(f"node{i}" for i in range(8))


def held(name: str, node: str, gpus: Sequence[int], *, prio: int = 0, gang: str = "", min_member: int = 0,
         start: float | None = None) -> RunningPod:  # fmt: skip
    return RunningPod(
        name=name,
        node=node,
        holder=f"uid-{name}",
        priority=prio,
        start_time=start,
        requests={"nvidia.com/gpu": str(len(gpus))},
        gang=gang,
        gang_min_member=min_member,
    )


class GangCluster:
    """Eight nodes; `gpus`: the devices each running pod holds."""

    def __init__(self, pods: Sequence[RunningPod], gpus: Mapping[str, Sequence[int]]) -> None:
        self.pods = list(pods)
        self.gpus = dict(gpus)

    def nodes(self, without: Sequence[RunningPod] = ()) -> list[NodeState]:
        gone = {p.key for p in without}
        left = [p for p in self.pods if p.key not in gone]
        return [built_node(n, left, devices=True, gpus=self.gpus) for n in NODES]

    def index(self, without: Sequence[RunningPod] = ()) -> ClusterIndex:
        index = ENGINE.new_index()
        for n in self.nodes(without):
            index.upsert(n)
        return index


def tree() -> NetworkTree:
    return build_tree(volcano_example(), {n: {} for n in NODES}).tree  # type: ignore[arg-type]


def members(count: int, gpus: int = 8, *, running_on: Sequence[str] = ()) -> tuple[PodRequest, ...]:
    pods = [PodRequest(uid=f"uid-w{i}", name=f"w{i}", requests={"nvidia.com/gpu": str(gpus)}) for i in range(count)]
    for i, node in enumerate(running_on):
        pods[i] = msgspec.structs.replace(pods[i], node_name=node)
    return tuple(pods)


def gang(count: int, gpus: int = 8, *, tier: int | None = None, soft: bool = False,
         running_on: Sequence[str] = ()) -> GangRequest:  # fmt: skip
    network = None
    if tier is not None:
        network = NetworkConstraint(mode=TopologyMode.SOFT if soft else TopologyMode.HARD, highest_tier=tier)
    pods = members(count, gpus, running_on=running_on)
    return GangRequest(name="ns/big", min_member=len(pods), network=network, pods=pods)


def preempt_gang(cluster: GangCluster, request: GangRequest, prio: int, **kwargs: object) -> GangPreemption:
    return ENGINE.preempt_gang(cluster.index(), tree(), request, prio, cluster.pods, **kwargs)  # type: ignore[arg-type]
