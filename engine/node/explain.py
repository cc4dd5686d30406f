"""Reasons in a user's words: why a node lost, why it cannot host the pod, why nothing fits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from engine.node.vendor import DeviceRequest, NodeScore
from schemas.topology import Device

MAX_DEVICE_REASONS = 4


def _plural(noun: str, n: int) -> str:
    return noun if n == 1 else f"{noun}s"


def unfit_device_reason(request: DeviceRequest, total: int, usable: int, rejected: Sequence[tuple[Device, str]]) -> str:
    """E.g. "2 of 8 GPUs free, 4 requested: GPU-ab excluded by nvidia.com/nouse-gpuuuid; GPU 3 unhealthy"."""
    head = f"{usable} of {total} {_plural(request.device_noun, total)} free, {request.count} requested"
    if not rejected:
        return head
    by_reason: dict[str, list[str]] = {}
    for device, why in rejected:  # grouped by reason, in device order of first appearance
        by_reason.setdefault(why, []).append(_label(request, device))
    parts = []
    for why, labels in by_reason.items():
        shown = ", ".join(labels[:MAX_DEVICE_REASONS])
        if len(labels) > MAX_DEVICE_REASONS:
            shown += f" and {len(labels) - MAX_DEVICE_REASONS} more"
        parts.append(f"{shown} {why}")
    return f"{head}: {'; '.join(parts)}"


def _label(request: DeviceRequest, device: Device) -> str:
    return device.uuid if device.uuid else f"{request.device_noun} {device.index}"


def unschedulable_summary(total_nodes: int, summaries: Sequence[str]) -> str:
    """kube-scheduler style: "0/16 nodes are available: 10 Insufficient nvidia.com/gpu, 6 node(s) were cordoned."."""
    counts = Counter(summaries)
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    listed = ", ".join(f"{n} {summary}" for summary, n in ordered)
    if not listed:
        return f"0/{total_nodes} nodes are available."
    return f"0/{total_nodes} nodes are available: {listed}."


# Score parts where less is better (the fragmentation policy's growth of expected fragment).
LOWER_IS_BETTER = frozenset({"frag_delta"})


def _gain(name: str, mine: float, best: float) -> float:
    """How far this node's part is ahead of the winner's (negative: behind)."""
    return best - mine if name in LOWER_IS_BETTER else mine - best


def loser_reason(winner: str, best: NodeScore, mine: NodeScore) -> str:
    """Which score parts put this node behind the winner, biggest gap first."""
    gaps = sorted(
        ((_gain(name, mine.parts.get(name, 0.0), value), name) for name, value in best.parts.items()),
        key=lambda gap: (gap[0], gap[1]),
    )
    behind = [f"{name} {mine.parts.get(name, 0.0):g} vs {best.parts[name]:g}" for gap, name in gaps if gap < 0]
    if mine.score == best.score:
        return f"tied with {winner} at {mine.score:g}; {winner} sorts first by name"
    detail = f" ({', '.join(behind)})" if behind else ""
    return f"score {mine.score:g} < {best.score:g} on {winner}{detail}"
