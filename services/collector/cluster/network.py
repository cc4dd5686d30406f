"""Volcano HyperNodes and Kueue Topologies -> topology.network / topology.levels events: pure functions.

A member or level that cannot be read is left out and returned as a Problem (translate.py's rule).
"""

from __future__ import annotations

from schemas.events import HyperNodeEvent, HyperNodeMember, MemberKind, TopologyLevelsEvent
from services.collector.cluster import objects as obj
from services.collector.cluster.objects import HyperNode, Topology
from services.collector.cluster.translate import Problem, label_selector

# --- hypernodes -------------------------------------------------------------------------------

_MEMBER_KINDS = {"Node": MemberKind.NODE, "HyperNode": MemberKind.HYPERNODE}


def _member(spec: obj.HyperNodeMemberSpec, kind: MemberKind) -> HyperNodeMember | str:
    """The member as published, or why it cannot be."""
    selector = spec.selector
    given = [s for s in (selector.exact_match, selector.regex_match, selector.label_match) if s is not None]
    if len(given) != 1:
        return f"needs exactly one of exactMatch, regexMatch, labelMatch; got {len(given)}"
    if selector.exact_match is not None:
        if not selector.exact_match.name:
            return "exactMatch.name is empty"
        return HyperNodeMember(kind=kind, name=selector.exact_match.name)
    if selector.regex_match is not None:
        if not selector.regex_match.pattern:
            return "regexMatch.pattern is empty"
        return HyperNodeMember(kind=kind, regex=selector.regex_match.pattern)
    assert selector.label_match is not None
    return HyperNodeMember(kind=kind, labels=label_selector(selector.label_match))


def hypernode_event(hypernode: HyperNode, observed_at: float) -> tuple[HyperNodeEvent, list[Problem]]:
    """Every member with its selector as written (exact name, regex or labels); the tree builder resolves them."""
    name = hypernode.metadata.name
    members: list[HyperNodeMember] = []
    problems: list[Problem] = []
    for i, spec in enumerate(hypernode.spec.members):
        kind = _MEMBER_KINDS.get(spec.type)
        if kind is None:
            reason = f"{spec.type!r} is not Node or HyperNode"
            problems.append(Problem(object=name, field=f"spec.members[{i}].type", reason=reason))
            continue
        member = _member(spec, kind)
        if isinstance(member, str):
            problems.append(Problem(object=name, field=f"spec.members[{i}].selector", reason=member))
            continue
        members.append(member)
    event = HyperNodeEvent(
        name=name,
        tier=hypernode.spec.tier,
        tier_name=hypernode.spec.tier_name,
        members=tuple(members),
        observed_at=observed_at,
    )
    return event, problems


def hypernode_deleted_event(name: str, tier: int, observed_at: float) -> HyperNodeEvent:
    return HyperNodeEvent(name=name, tier=tier, members=(), deleted=True, observed_at=observed_at)


# --- Kueue topologies -------------------------------------------------------------------------


def topology_levels_event(topology: Topology, observed_at: float) -> tuple[TopologyLevelsEvent, list[Problem]]:
    """The node-label keys of a Kueue Topology, top level first; an empty label is left out."""
    name = topology.metadata.name
    levels: list[str] = []
    problems: list[Problem] = []
    for i, level in enumerate(topology.spec.levels):
        if not level.node_label:
            problems.append(Problem(object=name, field=f"spec.levels[{i}].nodeLabel", reason="is empty"))
            continue
        levels.append(level.node_label)
    return TopologyLevelsEvent(name=name, levels=tuple(levels), observed_at=observed_at), problems


def topology_deleted_event(name: str, observed_at: float) -> TopologyLevelsEvent:
    return TopologyLevelsEvent(name=name, levels=(), deleted=True, observed_at=observed_at)
