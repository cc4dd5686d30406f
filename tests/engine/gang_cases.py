"""Shared builders for the gang tests: a cluster of 8-GPU H100 nodes, members, and one decision."""

from __future__ import annotations

from engine_builders import fixture_node

from engine import NodeState, PodRequest, new_index, place_gang
from engine.cluster.network import build_tree
from engine.decide.gang import GangDecision, GangRequest
from engine.node.vendors import registry
from schemas.events import NetworkConstraint, SubGroupPolicy, TopologyMode

H100 = "dgx-h100"
EIGHT_NODES = [f"node{i}" for i in range(8)]
TOR = {f"node{i}": f"s{i // 2}" for i in range(8)}  # the leaf of each node in Volcano's example tree


def cluster(busy: dict[str, list[int]] | None = None, names: list[str] = EIGHT_NODES) -> list[NodeState]:
    busy = busy or {}
    return [fixture_node(n, H100, busy=busy.get(n, [])) for n in names]


def pod(
    name: str, gpus: int = 8, *, labels: dict[str, str] | None = None, node_name: str = "", uid: str = ""
) -> PodRequest:
    return PodRequest(
        uid=uid or f"uid-{name}",
        name=name,
        requests={"nvidia.com/gpu": str(gpus)},
        labels=labels or {},
        node_name=node_name,
    )


def hard(tier: int) -> NetworkConstraint:
    return NetworkConstraint(mode=TopologyMode.HARD, highest_tier=tier)


def decide_gang(
    nodes: list[NodeState],
    hypernodes: list[object],
    pods: list[PodRequest],
    network: NetworkConstraint | None = None,
    sub_groups: tuple[SubGroupPolicy, ...] = (),
    *,
    min_member: int | None = None,
    minimum_placement: bool = False,
) -> GangDecision:
    index = new_index()
    for n in nodes:
        index.upsert(n)
    tree = build_tree(hypernodes, {n.name: n.labels for n in nodes}).tree  # type: ignore[arg-type]
    gang = GangRequest(
        name="ns/job",
        min_member=len(pods) if min_member is None else min_member,
        network=network,
        sub_groups=sub_groups,
        pods=tuple(pods),
        minimum_placement=minimum_placement,
    )
    return place_gang(registry, index, tree, gang)
