"""Shared builders for the gang API tests: a zone / rack / host label tree, members, PodGroups, one decision."""

from __future__ import annotations

import json

import msgspec
from engine_builders import fixture_node
from gang_cases import H100

from engine import NodeState, PodRequest, new_index, place_gang
from engine.cluster.network import build_tree
from engine.core.model import GangInput
from engine.decide.gang import GangDecision
from engine.decide.gang.input import gang_request
from engine.node.vendors import registry
from schemas.events import NetworkConstraint, TopologyMode
from schemas.gangs_kai import KaiPodGroup
from schemas.gangs_kube import KubePodGroup

ZONE, RACK, HOST = "topology.kubernetes.io/zone", "topology.kubernetes.io/rack", "kubernetes.io/hostname"
LEVELS = (ZONE, RACK, HOST)


def hard(level: str) -> NetworkConstraint:
    return NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=level)


def soft(level: str) -> NetworkConstraint:
    return NetworkConstraint(mode=TopologyMode.SOFT, highest_tier_name=level)


def kube_group(spec: dict[str, object]) -> KubePodGroup:
    return msgspec.convert({"metadata": {"name": "g"}, "spec": spec}, KubePodGroup)


def kai_group(spec: dict[str, object], annotations: dict[str, str] | None = None) -> KaiPodGroup:
    return msgspec.convert({"metadata": {"name": "g", "annotations": annotations or {}}, "spec": spec}, KaiPodGroup)


def layers(*pairs: tuple[str, int]) -> str:
    return json.dumps([{"topology": t, "size": s} for t, s in pairs])


def labelled(name: str, zone: str, rack: str, free: int) -> NodeState:
    node = fixture_node(name, H100, busy=list(range(8 - free)))
    labels = {**node.labels, ZONE: zone, RACK: rack, HOST: name}
    return msgspec.structs.replace(node, labels=labels)


def member(name: str, gpus: int = 1, labels: dict[str, str] | None = None, **annotations: str) -> PodRequest:
    return PodRequest(
        uid=f"uid-{name}",
        name=name,
        requests={"nvidia.com/gpu": str(gpus)},
        labels=labels or {},
        annotations=annotations,
    )


def decide(nodes: list[NodeState], given: GangInput) -> GangDecision:
    index = new_index()
    for n in nodes:
        index.upsert(n)
    tree = build_tree((), {n.name: n.labels for n in nodes}, topology_levels=LEVELS).tree
    return place_gang(registry, index, tree, gang_request(given))


def level_of(node: str, level: str, nodes: list[NodeState]) -> str:
    return next(n.labels[level] for n in nodes if n.name == node)
