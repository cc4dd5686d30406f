"""A gang as the engine reads it, and its answer: every member's node and devices, or the reason."""

from __future__ import annotations

import msgspec

from engine.core.model import PodRequest
from schemas.events import DeviceAssignment, NetworkConstraint, SubGroupPolicy


class GangRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A gang as the engine reads it: its members (running ones carry `node_name`) and its constraints."""

    name: str
    min_member: int = 1
    network: NetworkConstraint | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    pods: tuple[PodRequest, ...]


class MemberPlacement(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    uid: str
    node: str | None = None  # None: not placed (the gang is not placed)
    devices: tuple[DeviceAssignment, ...] = ()
    score: float = 0.0
    score_parts: dict[str, float] = {}
    running: bool = False  # already on its node before this decision
    qos: str = ""
    app_class: str = ""


class GangDecision(msgspec.Struct, frozen=True, kw_only=True):
    gang: str
    placed: bool
    hypernode: str | None = None  # the lowest hypernode holding every member
    tier: int | None = None
    pods: tuple[MemberPlacement, ...] = ()
    reason: str = ""
    hypernodes_planned: int = 0  # candidates planned in full (the rest were pruned by their slots)
