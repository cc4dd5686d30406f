"""A gang as the engine reads it, and its answer: every member's node and devices, or the reason."""

from __future__ import annotations

import msgspec

from engine.core.model import PodRequest
from engine.node.dra.model import AllocationResult
from schemas.events import DeviceAssignment, NetworkConstraint, SubGroupPolicy


class GangRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A gang as the engine reads it: its members (running ones carry `node_name`) and its constraints."""

    name: str
    min_member: int = 1
    network: NetworkConstraint | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    pods: tuple[PodRequest, ...]
    # When the whole gang does not fit: place at least `min_member` members (running ones count) and
    # each policy's minSubGroups, as Volcano and Kueue do, the rest joining later. Off: all or nothing.
    minimum_placement: bool = False
    # Kueue's balanced placement (feature gate TASBalancedPlacement): a preferred level that needs several
    # domains gets about as many members in each (engine.decide.gang.balance).
    balanced: bool = False


class ClaimAllocation(msgspec.Struct, frozen=True, kw_only=True):
    """One of a member's ResourceClaims and its status.allocation, as `engine place --cluster` answers a pod's."""

    namespace: str
    name: str
    allocation: AllocationResult


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
    rank: int | None = None  # its pod index (engine.decide.gang.ranks); None: it has none
    domain: str | None = None  # the lowest hypernode holding its node
    sub_group: str = ""  # "<policy>/<values>" or "<policy>/slice-<n>"; "": the gang's own
    claims: tuple[ClaimAllocation, ...] = ()  # its ResourceClaims allocated on `node` (a gang given its claims)


class TierRefusal(msgspec.Struct, frozen=True, kw_only=True):
    """A tier the walk went past, and why none of its hypernodes took the whole gang."""

    tier: int
    tier_name: str = ""  # its hypernodes' tierName; "the whole cluster" for the tree's virtual top
    reason: str


class GangDecision(msgspec.Struct, frozen=True, kw_only=True):
    gang: str
    placed: bool
    hypernode: str | None = None  # the lowest hypernode holding every member
    tier: int | None = None
    pods: tuple[MemberPlacement, ...] = ()
    reason: str = ""
    hypernodes_planned: int = 0  # candidates planned in full (the rest were pruned by their slots)
    partial: bool = False  # placed at its minimum: some pending members wait (node None; `reason` says why)
    refused_tiers: tuple[TierRefusal, ...] = ()  # tiers below its own (unplaced: every one walked), lowest first
