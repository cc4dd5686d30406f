"""Why a pod is where it is, from what the placer and the binder published: `topoplace explain`.

Pure: the messages of `placements`, `gangs.placements` and `bindings` in, the pod's latest
decision and what the binder did with it out, and its printed form.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from schemas.enforcement import Enforcement
from schemas.events import (
    Alternative,
    BindingEvent,
    DeviceAssignment,
    GangPlacementEvent,
    GangTierRefusal,
    PlacementEvent,
    PlacementOutcome,
)


class GangSide(msgspec.Struct, frozen=True, kw_only=True):
    """The gang a member was placed with, and where the gang as a whole sits."""

    name: str
    hypernode: str = ""
    tier: int | None = None
    refused_tiers: tuple[GangTierRefusal, ...] = ()  # why each lower tier was refused (unplaced: each tier walked)


class BindingSide(msgspec.Struct, frozen=True, kw_only=True):
    outcome: str
    node: str = ""
    reason: str = ""
    attempts: int = 1


class PodStory(msgspec.Struct, frozen=True, kw_only=True):
    """One pod's latest decision, as `topoplace explain --json` prints it."""

    namespace: str
    name: str
    uid: str
    decision_id: str
    outcome: PlacementOutcome
    node: str = ""
    devices: tuple[DeviceAssignment, ...] = ()
    score: float = 0.0
    score_parts: dict[str, float] = {}
    enforcement: Enforcement = Enforcement.DEVICE_PLUGIN
    alternatives: tuple[Alternative, ...] = ()
    reason: str = ""  # why it is unschedulable
    decided_at: float = 0.0
    gang: GangSide | None = None
    binding: BindingSide | None = None  # None: the binder has not answered this decision (yet)


def parse_pod(text: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` -> (namespace, name); raises ValueError naming what is wrong."""
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ValueError(f"pod: expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def pod_story(
    namespace: str,
    name: str,
    placements: Iterable[PlacementEvent],
    gang_placements: Iterable[GangPlacementEvent],
    bindings: Iterable[BindingEvent],
) -> PodStory | None:
    """The pod's latest decision (by decision time; the later message on a tie) and its binding."""
    latest: tuple[float, PlacementEvent, GangPlacementEvent | None] | None = None
    candidates: list[tuple[PlacementEvent, GangPlacementEvent | None]] = [(p, None) for p in placements]
    candidates += [(member, gang) for gang in gang_placements for member in gang.members]
    for placement, gang in candidates:
        if (placement.namespace, placement.name) != (namespace, name):
            continue
        if latest is None or placement.decided_at >= latest[0]:
            latest = (placement.decided_at, placement, gang)
    if latest is None:
        return None
    _, placement, gang = latest
    answer: BindingEvent | None = None
    for binding in bindings:
        if binding.decision_id == placement.decision_id:
            answer = binding  # the last word of the binder on this decision
    return PodStory(
        namespace=namespace,
        name=name,
        uid=placement.uid,
        decision_id=placement.decision_id,
        outcome=placement.outcome,
        node=placement.node,
        devices=placement.devices,
        score=placement.score,
        score_parts=dict(placement.score_parts),
        enforcement=placement.enforcement,
        alternatives=placement.alternatives,
        reason=placement.reason or (gang.reason if gang is not None else ""),
        decided_at=placement.decided_at,
        gang=(
            GangSide(name=gang.name, hypernode=gang.hypernode, tier=gang.tier, refused_tiers=gang.refused_tiers)
            if gang is not None
            else None
        ),
        binding=(
            BindingSide(outcome=answer.outcome.value, node=answer.node, reason=answer.reason, attempts=answer.attempts)
            if answer is not None
            else None
        ),
    )


def _device(device: DeviceAssignment) -> str:
    label = f"{device.index}" + (f" {device.uuid}" if device.uuid else "")
    memory = "all memory" if device.memory_mib == 0 else f"{device.memory_mib} MiB"
    share = "whole" if device.cores >= 100 and device.memory_mib == 0 else f"{device.cores}% cores, {memory}"
    return f"{label} ({share})"


def story_lines(story: PodStory) -> list[str]:
    """The story in a user's words, one fact a line."""
    lines = [f"pod {story.namespace}/{story.name} (uid {story.uid}), decision {story.decision_id}"]
    if story.outcome is PlacementOutcome.PLACED:
        lines.append(f"placed on {story.node}, enforced by {story.enforcement.value}")
        lines.append("devices: " + ("; ".join(_device(d) for d in story.devices) or "none"))
        parts = ", ".join(f"{part} {value:g}" for part, value in sorted(story.score_parts.items()))
        lines.append(f"score {story.score:g}" + (f" ({parts})" if parts else ""))
    else:
        lines.append(f"unschedulable: {story.reason or 'no reason given'}")
    if story.gang is not None:
        where = f" on hypernode {story.gang.hypernode}" if story.gang.hypernode else ""
        tier = f" (tier {story.gang.tier})" if story.gang.tier is not None else ""
        lines.append(f"gang {story.gang.name}{where}{tier}")
        if story.outcome is PlacementOutcome.PLACED:  # an unplaced gang's reason names them already
            lines.extend(f"  refused {refusal.text()}" for refusal in story.gang.refused_tiers)
    if story.alternatives:
        lines.append("alternatives:")
        lines.extend(f"  {a.node} (score {a.score:g}): {a.reason}" for a in story.alternatives)
    elif story.outcome is PlacementOutcome.PLACED:
        lines.append("alternatives: none recorded")
    if story.binding is None:
        if story.outcome is PlacementOutcome.PLACED:
            lines.append("binding: no answer from the binder yet")
    else:
        b = story.binding
        on = f" on {b.node}" if b.node else ""
        why = f": {b.reason}" if b.reason else ""
        lines.append(f"binding: {b.outcome}{on} after {b.attempts} attempt(s){why}")
    return lines
