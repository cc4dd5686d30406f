"""Events about the network: topology.network (hypernodes), topology.levels."""

from __future__ import annotations

import enum

import msgspec

from schemas.events.base import Event

# --- topology.network (compacted, key = hypernode) ------------------------------------------


class MemberKind(enum.StrEnum):
    NODE = "node"
    HYPERNODE = "hypernode"


class LabelSelectorRequirement(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()


class LabelSelector(msgspec.Struct, frozen=True, kw_only=True):
    """A Kubernetes label selector (metav1.LabelSelector): every label and every expression must match."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class HyperNodeMember(msgspec.Struct, frozen=True, kw_only=True):
    """One member selector of a HyperNode, as written: exactly one of `name`, `regex`, `labels` is set.

    `name` selects a node or a HyperNode by name (Volcano's exactMatch); `regex`
    (regexMatch, Go RE2 matched anywhere in the name) and `labels` (labelMatch)
    select nodes.
    """

    kind: MemberKind
    name: str = ""
    regex: str = ""
    labels: LabelSelector | None = None


class HyperNodeEvent(Event, frozen=True, kw_only=True):
    """One level of the network tree: tier 1 = closest (a ToR), higher tiers wrap lower ones."""

    name: str
    tier: int
    tier_name: str = ""  # Volcano's spec.tierName, which networkTopology.highestTierName refers to
    members: tuple[HyperNodeMember, ...]
    deleted: bool = False
    observed_at: float = 0.0


# --- topology.levels (compacted, key = Topology name) ---------------------------------------


class TopologyLevelsEvent(Event, frozen=True, kw_only=True):
    """A Kueue (or KAI) Topology: node-label keys, top level first, that build the network tree."""

    name: str
    levels: tuple[str, ...]
    deleted: bool = False
    observed_at: float = 0.0
