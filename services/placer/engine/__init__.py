"""The topology engine: which node and which devices a pod gets, and why.

Pure and deterministic: no I/O, no clock, no randomness; the same snapshot and
request give the same decision. Read top-down:

    place()            this file: picks the vendor, runs the node loop
    loop.py            the node loop shared by all vendors, ranking
    vendor.py          the contract a vendor implements, the per-node scratch state
    vendors/<name>.py  one module per vendor (nvidia, metax, neuron)
    search.py          bounded branch-and-bound over pair scores
    explain.py         reasons in a user's words
"""

from __future__ import annotations

import msgspec

from services.placer.engine import cache
from services.placer.engine.loop import NodeMiss, evaluate_node, place_with
from services.placer.engine.model import (
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
from services.placer.engine.vendor import RequestError, SetCandidate
from services.placer.engine.vendors import registry

__all__ = [
    "Allocation",
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
    "place",
]


def place(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT) -> Decision:
    """The best node and devices for `request`, or node None with the reason.

    Raises RequestError(field, reason) when the request cannot be read.
    """
    return place_with(registry, snapshot, request, mode)


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
