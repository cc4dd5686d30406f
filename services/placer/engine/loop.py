"""The node loop shared by every vendor: filter nodes, ask the vendor per node, rank.

Ranking rule: higher node score first; equal scores go to the node whose
name sorts first. Nodes are visited in name order, so nothing depends on
the order the snapshot lists them in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from schemas.topology import Device
from services.placer.engine.explain import loser_reason, unfit_device_reason, unschedulable_summary
from services.placer.engine.model import Decision, Mode, NodeState, NodeVerdict, PodRequest, Snapshot
from services.placer.engine.vendor import (
    DeviceRequest,
    NodeScore,
    NodeScratch,
    Rejection,
    RequestError,
    SetChoice,
    Unfit,
    VendorPlugin,
    VendorRegistry,
)

CORDONED = "node(s) were cordoned"
NOT_READY = "node(s) were not ready"


class NodeFit(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    choice: SetChoice
    score: NodeScore
    warnings: tuple[str, ...] = ()


class NodeMiss(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    unfit: Unfit
    warnings: tuple[str, ...] = ()


def evaluate_node(plugin: VendorPlugin, request: DeviceRequest, node: NodeState, mode: Mode) -> NodeFit | NodeMiss:
    """One node: node filter, device filter, set search, node score."""
    if not node.ready:
        return NodeMiss(node=node.name, unfit=Unfit(reason="not ready", summary=NOT_READY))
    if node.unschedulable:
        return NodeMiss(node=node.name, unfit=Unfit(reason="cordoned", summary=CORDONED))
    scratch = NodeScratch.build(node, mode)
    own = tuple(d for d in scratch.devices.values() if d.vendor is plugin.vendor)
    insufficient = f"Insufficient {request.resource}"
    if not own:
        return NodeMiss(node=node.name, unfit=Unfit(reason=f"no {request.device_noun} devices", summary=insufficient))
    usable: list[Device] = []
    rejected: list[tuple[Device, str]] = []
    classes: Counter[str] = Counter()
    for device in own:
        why = plugin.filter_device(scratch, request, device)
        if why is None:
            usable.append(device)
        elif isinstance(why, Rejection):
            rejected.append((device, why.reason))
            classes[why.summary] += 1
        else:
            rejected.append((device, why))
            classes[insufficient] += 1
    if len(usable) < request.count:
        reason = unfit_device_reason(request, len(own), len(usable), rejected)
        # A node with too few devices lacks the resource itself; one with enough devices
        # lacks what most of them were refused for (memory, cores, health...), ties by name.
        summary = insufficient
        if len(own) >= request.count and classes:
            summary = min(classes, key=lambda c: (-classes[c], c))
        return _miss(node, Unfit(reason=reason, summary=summary), scratch)
    outcome = plugin.search(scratch, request, tuple(usable))
    if isinstance(outcome, Unfit):
        return _miss(node, outcome, scratch)
    score = plugin.node_score(scratch, request, outcome)
    return NodeFit(node=node.name, choice=outcome, score=score, warnings=_prefixed(node, scratch))


def _miss(node: NodeState, unfit: Unfit, scratch: NodeScratch) -> NodeMiss:
    return NodeMiss(node=node.name, unfit=unfit, warnings=_prefixed(node, scratch))


def _prefixed(node: NodeState, scratch: NodeScratch) -> tuple[str, ...]:
    return tuple(f"{node.name}: {w}" for w in scratch.warnings)


def place_with(registry: VendorRegistry, snapshot: Snapshot, request: PodRequest, mode: Mode) -> Decision:
    claimed = registry.claim(request)
    if claimed is None:
        known = ", ".join(p.name for p in registry.plugins)
        raise RequestError("requests", f"asks for no device resource of a known vendor ({known})")
    plugin, device_request = claimed
    nodes = sorted(snapshot.nodes, key=lambda n: n.name)
    _check_unique(nodes)
    results = [evaluate_node(plugin, device_request, node, mode) for node in nodes]
    fits = sorted((r for r in results if isinstance(r, NodeFit)), key=lambda f: (-f.score.score, f.node))
    misses = [r for r in results if isinstance(r, NodeMiss)]
    warnings = tuple(w for r in results for w in r.warnings)
    considered = sum(f.choice.considered for f in fits)
    miss_verdicts = tuple(NodeVerdict(node=m.node, fits=False, reason=m.unfit.reason) for m in misses)
    if not fits:
        return Decision(
            node=None,
            reason=unschedulable_summary(len(nodes), [m.unfit.summary for m in misses]),
            alternatives=miss_verdicts,
            candidates_considered=considered,
            warnings=warnings,
        )
    winner = fits[0]
    losers = tuple(
        NodeVerdict(
            node=f.node,
            fits=True,
            score=f.score.score,
            devices=f.choice.devices,
            reason=loser_reason(winner.node, winner.score, f.score),
        )
        for f in fits[1:]
    )
    parts = dict(winner.choice.parts)
    parts.update(winner.score.parts)
    return Decision(
        node=winner.node,
        devices=winner.choice.assignments,
        score=winner.score.score,
        score_parts=parts,
        alternatives=losers + miss_verdicts,
        candidates_considered=considered,
        warnings=warnings,
        qos=device_request.qos,
        app_class=device_request.app_class,
    )


def _check_unique(nodes: Sequence[NodeState]) -> None:
    for a, b in zip(nodes, nodes[1:], strict=False):
        if a.name == b.name:
            raise RequestError("snapshot.nodes", f"node {a.name!r} appears twice")
