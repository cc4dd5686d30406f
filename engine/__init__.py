"""The topology engine: which node and which devices a pod gets, and why.

Pure and deterministic: no I/O, no clock, no randomness; the same snapshot and
request give the same decision. Four levels, each a package that imports only
the ones below it (import-linter's `layers` contract):

    decide/     one decision: pod.py (claim.py, ranking.py, explanation.py), node_rules.py,
                kube/ (kube-scheduler's node filters), gang/ (a gang in one network domain)
    cluster/    the cluster: index.py (nodes grouped into device classes), network/ (the network tree)
    node/       one node: answer.py (the node answer every vendor shares), vendor.py (the contract),
                vendors/<name>/ (nvidia, metax, neuron), search*.py, fragmentation.py, explain.py
    core/       what all read: model.py, errors.py, quantities.py, node_key.py, cache.py, validate.py

This file: place() = the cluster index of the snapshot, one decision over it.
"""

from __future__ import annotations

import msgspec

from engine.cluster.index import ClusterIndex, NodeReads
from engine.core import cache
from engine.core.model import (
    Allocation,
    Decision,
    Mode,
    NodeState,
    NodeVerdict,
    PlaceInput,
    PodRequest,
    Snapshot,
    WorkloadClass,
)
from engine.decide.pod import place_indexed
from engine.node.answer import NodeMiss, evaluate_node
from engine.node.fragmentation import reads_cpu
from engine.node.vendor import RequestError, SetCandidate
from engine.node.vendors import registry

__all__ = [
    "Allocation",
    "ClusterIndex",
    "Decision",
    "DeviceChoice",
    "Mode",
    "NodeState",
    "NodeVerdict",
    "PlaceInput",
    "PodRequest",
    "RequestError",
    "SetCandidate",
    "Snapshot",
    "WorkloadClass",
    "choose_devices",
    "index_of",
    "new_index",
    "place",
    "place_in",
]


NODE_READS = NodeReads(labels=registry.node_reads[0], annotations=registry.node_reads[1])
# With the node's CPU too: for a workload whose classes name CPU (the fragmentation policy weighs it).
NODE_READS_CPU = msgspec.structs.replace(NODE_READS, resources=True)
_last_index: list[ClusterIndex] = []  # the index of the last snapshot placed on: the next one updates it


def index_of(snapshot: Snapshot) -> ClusterIndex:
    """The cluster index of `snapshot` (the previous snapshot's, updated where nodes differ)."""
    previous = _last_index[0] if _last_index else None
    reads = NODE_READS_CPU if reads_cpu(snapshot.workload) else NODE_READS
    try:
        index = ClusterIndex.of(snapshot, reads, previous)
    except ValueError as exc:
        _last_index.clear()
        raise RequestError("snapshot.nodes", f"node {exc.args[0]!r} appears twice") from None
    _last_index[:] = [index]
    return index


def place(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT, *, explain: bool = False) -> Decision:
    """The best node and devices for `request`, or node None with the reason.

    `explain` lists every other node with why it lost (`Decision.alternatives`).
    Raises RequestError(field, reason) when the request cannot be read.
    """
    return place_indexed(registry, index_of(snapshot), request, mode, workload=snapshot.workload, explain=explain)


def place_in(
    index: ClusterIndex,
    request: PodRequest,
    mode: Mode = Mode.DEFAULT,
    *,
    workload: tuple[WorkloadClass, ...] = (),
    explain: bool = False,
    runners_up: int = 0,
) -> Decision:
    """`place` over an index the caller keeps current (the placer's view does).

    `runners_up`: also the best few other nodes that fit, with why they lost (`Decision.alternatives`)."""
    return place_indexed(registry, index, request, mode, workload=workload, explain=explain, runners_up=runners_up)


def new_index(*, cpu: bool = False) -> ClusterIndex:
    """An empty index reading what the registered vendors read of a node (`cpu`: and its CPU, which a
    fragmentation workload naming CPU needs; without it the policy does not weigh CPU)."""
    return ClusterIndex(NODE_READS_CPU if cpu else NODE_READS)


class DeviceChoice(msgspec.Struct, frozen=True, kw_only=True):
    """One node's answer (`topoplace engine pick`): devices in order, score, other sets."""

    node: str
    devices: tuple[int, ...] = ()
    score: float = 0.0  # the set's internal score (NVIDIA: the pair-score sum)
    score_parts: dict[str, float] = {}
    alternatives: tuple[SetCandidate, ...] = ()
    reason: str = ""  # set when nothing fits
    warnings: tuple[str, ...] = ()


def choose_devices(node: NodeState, request: PodRequest, mode: Mode = Mode.DEFAULT) -> DeviceChoice:
    """The devices one node would give `request` (the node loop's per-node step, on its own).

    Computed afresh, without the memo tables: one node has nothing to share, and
    `bench.search_speed` times exactly this step."""
    claimed = registry.claim(request)
    if claimed is None:
        raise RequestError("requests", "asks for no device resource of a known vendor")
    plugin, device_request = claimed
    with cache.disabled():
        result = evaluate_node(plugin, device_request, node, mode)
    if isinstance(result, NodeMiss):
        return DeviceChoice(node=node.name, reason=result.unfit.reason, warnings=result.warnings)
    return DeviceChoice(
        node=node.name,
        devices=result.choice.devices,
        score=result.choice.set_score,
        score_parts=dict(result.choice.parts),
        alternatives=result.choice.runners_up,
        warnings=result.warnings,
    )
