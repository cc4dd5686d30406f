"""Events about gangs: gangs.pending, gangs.placements."""

from __future__ import annotations

import enum
from typing import ClassVar

import msgspec

from schemas.events.base import MAX_GANG_EVENT_BYTES, Event
from schemas.events.decisions import PlacementEvent, PlacementOutcome
from schemas.events.network import LabelSelector
from schemas.events.pods import PendingPodEvent

# --- gangs.pending (key = gang name) --------------------------------------------------------


class TopologyMode(enum.StrEnum):
    HARD = "hard"  # never above the allowed tier: unschedulable instead
    SOFT = "soft"  # prefer low tiers; never unschedulable for the network's sake


class NetworkConstraint(msgspec.Struct, frozen=True, kw_only=True):
    """How close a gang's (or subgroup's) pods must be: Volcano's networkTopology, Kueue's topology requests.

    The highest tier allowed is `highest_tier`, or the tier named `highest_tier_name` (a Volcano
    tierName, or for a tree of label levels the level's node-label key, as Kueue names levels).
    """

    mode: TopologyMode = TopologyMode.HARD
    highest_tier: int | None = None
    highest_tier_name: str = ""


class SubGroupPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Volcano's subGroupPolicy (or a Kueue slice): members grouped by label values, each group close."""

    name: str = ""
    sub_group_size: int = 0  # members per subgroup (0: as many as share the label values)
    min_sub_groups: int = 0
    match_label_keys: tuple[str, ...] = ()
    label_selector: LabelSelector | None = None  # the members it applies to (None: every member)
    network: NetworkConstraint | None = None
    # The policy (by name) whose subgroups this one divides further, each inside its parent's domain
    # (KAI's nested subgroups, Kueue's multi-layer slices); "": it divides the gang's members.
    parent: str = ""


class RunningMember(msgspec.Struct, frozen=True, kw_only=True):
    """A gang member already bound: it is never placed again, and later members stay near it."""

    uid: str
    name: str
    node: str


class PendingGangEvent(Event, frozen=True, kw_only=True):
    """A gang whose members are known: decided as one unit, never below its minimum.

    Published by the cluster watcher once at least `min_member` members exist
    (pending + running), from a Volcano PodGroup, Kueue's pod-group annotations, a Workload API
    PodGroup or Workload, or a KAI PodGroup.
    """

    max_bytes: ClassVar[int] = MAX_GANG_EVENT_BYTES

    name: str  # "<namespace>/<group name>"
    namespace: str
    min_member: int = 1
    network: NetworkConstraint | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    members: tuple[PendingPodEvent, ...]  # pending, by name
    running: tuple[RunningMember, ...] = ()
    source: str = ""  # "podgroup" (Volcano), "kueue", "scheduling.k8s.io" (Workload API) or "kai"
    observed_at: float = 0.0


# --- gangs.placements (key = gang name) -----------------------------------------------------


class GangTierRefusal(msgspec.Struct, frozen=True, kw_only=True):
    """A tier of the network tree the gang search went past, and why no hypernode of it took the whole gang."""

    tier: int
    tier_name: str = ""  # its hypernodes' tierName; "the whole cluster" for the tree's virtual top
    reason: str

    def text(self) -> str:
        """`tier 1 (rack): at most 2 of 3 pending member(s) fit in one hypernode (rack-a)`."""
        return f"tier {self.tier}" + (f" ({self.tier_name})" if self.tier_name else "") + f": {self.reason}"


class GangPlacementEvent(Event, frozen=True, kw_only=True):
    """The placer's one decision for a whole gang: every member placed, its minimum, or none (UNSCHEDULABLE)."""

    max_bytes: ClassVar[int] = MAX_GANG_EVENT_BYTES

    decision_id: str
    name: str  # "<namespace>/<group name>"
    namespace: str
    outcome: PlacementOutcome
    # One per pending member (all PLACED, or all UNSCHEDULABLE); placed at the gang's minimum,
    # only the members placed (the rest stay pending, `reason` says so).
    members: tuple[PlacementEvent, ...]
    hypernode: str = ""  # the lowest hypernode holding every member (running ones included)
    tier: int | None = None  # its tier
    reason: str = ""
    # Why each tier below it was refused (unplaced: every tier walked), lowest first: the engine's refused_tiers.
    refused_tiers: tuple[GangTierRefusal, ...] = ()
    decided_at: float = 0.0
