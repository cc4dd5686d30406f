"""Gangs as NVIDIA's KAI scheduler describes them, read into the event contract's terms.

- A PodGroup (`scheduling.run.ai/v2alpha2`), members joined by the pod annotation
  `pod-group-name`: `spec.minMember`, `spec.topologyConstraint` {topology, requiredTopologyLevel,
  preferredTopologyLevel}, `spec.subGroups[]` {name, minMember, parent, topologyConstraint}; a pod
  is in the subgroup its label `kai.scheduler/subgroup-name` names.
- Without a topologyConstraint, the annotations KAI's pod-grouper copies from the workload:
  `kai.scheduler/topology`, `kai.scheduler/topology-required-placement`,
  `kai.scheduler/topology-preferred-placement` (on the PodGroup, else on its pods).
- A `Topology` (`kai.scheduler/v1alpha1`): `spec.levels[].nodeLabel`, top level first, as Kueue's.

A required level is a hard constraint (with a preferred one too: the walk from the lowest tier up
already prefers the tighter level inside it); a preferred level alone is soft. Levels are named by
their node-label key, which is the tier's name in a tree of label levels.

Each subgroup that holds pods (one no other names as `parent`) is a subgroup policy of its own:
its members are those labelled with its name, it is ready at its `minMember`, and every one is
required (KAI places a PodGroup only with each subgroup at its minimum). A parent's required level
cannot be a domain shared by several subgroups in the one gang search, so it is kept safe instead:
the subgroups under it become one, inside the tightest required level among the parent and them
(never looser than KAI asks; it may refuse what KAI would place).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from schemas.errors import FieldError
from schemas.events import LabelSelector, LabelSelectorRequirement, NetworkConstraint, SubGroupPolicy, TopologyMode

KAI_GROUP_ANNOTATION = "pod-group-name"
KAI_SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
KAI_TOPOLOGY = "kai.scheduler/topology"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
KAI_PODGROUP_API = "scheduling.run.ai/"


class KaiTopologyConstraint(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    topology: str = ""
    required_topology_level: str = ""
    preferred_topology_level: str = ""


class KaiSubGroup(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    name: str = ""
    min_member: int = 1
    parent: str | None = None
    topology_constraint: KaiTopologyConstraint | None = None


class KaiPodGroupSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    min_member: int = 1
    topology_constraint: KaiTopologyConstraint | None = None
    sub_groups: tuple[KaiSubGroup, ...] = ()


class KaiMeta(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""
    namespace: str = "default"
    annotations: dict[str, str] = {}


class KaiPodGroup(msgspec.Struct, frozen=True, kw_only=True):
    """A KAI PodGroup as `kubectl get podgroups.scheduling.run.ai -o json` prints it (the fields read)."""

    metadata: KaiMeta = KaiMeta()
    spec: KaiPodGroupSpec = KaiPodGroupSpec()


def constraint_of(group: KaiPodGroup, pod_annotations: Mapping[str, str]) -> KaiTopologyConstraint | None:
    """The PodGroup's topologyConstraint, else the placement annotations (the PodGroup's, else its pods')."""
    given = group.spec.topology_constraint
    if given is not None and (given.required_topology_level or given.preferred_topology_level):
        return given
    for notes in (group.metadata.annotations, pod_annotations):
        if notes.get(KAI_REQUIRED) or notes.get(KAI_PREFERRED):
            return KaiTopologyConstraint(
                topology=notes.get(KAI_TOPOLOGY, ""),
                required_topology_level=notes.get(KAI_REQUIRED, ""),
                preferred_topology_level=notes.get(KAI_PREFERRED, ""),
            )
    return given


def network_of(constraint: KaiTopologyConstraint | None) -> NetworkConstraint | None:
    if constraint is None:
        return None
    if constraint.required_topology_level:
        return NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=constraint.required_topology_level)
    if constraint.preferred_topology_level:
        return NetworkConstraint(mode=TopologyMode.SOFT, highest_tier_name=constraint.preferred_topology_level)
    return None


def _check(group: KaiPodGroup) -> dict[str, KaiSubGroup]:
    if group.spec.min_member < 1:
        raise FieldError("spec.minMember", f"must be at least 1, got {group.spec.min_member}")
    by_name: dict[str, KaiSubGroup] = {}
    for i, sub in enumerate(group.spec.sub_groups):
        field = f"spec.subGroups[{i}]"
        if not sub.name:
            raise FieldError(f"{field}.name", "must not be empty")
        if sub.name in by_name:
            raise FieldError(f"{field}.name", f"{sub.name!r} is given twice")
        if sub.min_member < 0:
            raise FieldError(f"{field}.minMember", f"must not be negative, got {sub.min_member}")
        by_name[sub.name] = sub
    for i, sub in enumerate(group.spec.sub_groups):
        seen = {sub.name}
        parent = sub.parent
        while parent is not None:
            if parent not in by_name:
                raise FieldError(f"spec.subGroups[{i}].parent", f"no subgroup is named {parent!r}")
            if parent in seen:
                raise FieldError(f"spec.subGroups[{i}].parent", f"{parent!r} is its own ancestor")
            seen.add(parent)
            parent = by_name[parent].parent
    return by_name


def kai_policy(
    group: KaiPodGroup, pod_annotations: Mapping[str, str], tiers: Mapping[str, int]
) -> tuple[NetworkConstraint | None, tuple[SubGroupPolicy, ...]]:
    """The PodGroup's network constraint and its subgroups as policies (`tiers`: tier by level name, to
    find the tightest of a parent's and its subgroups' required levels). FieldError names a bad field."""
    by_name = _check(group)
    parents = {s.parent for s in by_name.values() if s.parent is not None}
    leaves = [s for s in group.spec.sub_groups if s.name not in parents]
    merged: dict[str, list[KaiSubGroup]] = {}  # the topmost constrained ancestor -> its leaves
    for leaf in leaves:
        top = _topmost_required(leaf, by_name)
        merged.setdefault(top.name if top is not None else f"\0{leaf.name}", []).append(leaf)
    policies: list[SubGroupPolicy] = []
    for key, members in merged.items():
        names = tuple(m.name for m in members)
        head = by_name[key] if not key.startswith("\0") else members[0]
        constraints = [m.topology_constraint for m in members]
        constraints += [a.topology_constraint for m in members for a in _ancestors(m, by_name)]
        found = _tightest([c for c in constraints if c is not None], tiers)
        single = len(members) == 1
        policies.append(
            SubGroupPolicy(
                name=head.name,
                # one subgroup: ready at its minMember; merged ones: one unit of all their members
                sub_group_size=members[0].min_member if single else 0,
                min_sub_groups=1 if any(m.min_member > 0 for m in members) else 0,
                match_label_keys=(KAI_SUBGROUP_LABEL,) if single else (),
                label_selector=LabelSelector(
                    match_expressions=(LabelSelectorRequirement(key=KAI_SUBGROUP_LABEL, operator="In", values=names),)
                ),
                network=found or network_of(head.topology_constraint),
            )
        )
    return network_of(constraint_of(group, pod_annotations)), tuple(policies)


def _ancestors(sub: KaiSubGroup, by_name: Mapping[str, KaiSubGroup]) -> list[KaiSubGroup]:
    out: list[KaiSubGroup] = []
    parent = sub.parent
    while parent is not None:
        out.append(by_name[parent])
        parent = by_name[parent].parent
    return out


def _topmost_required(leaf: KaiSubGroup, by_name: Mapping[str, KaiSubGroup]) -> KaiSubGroup | None:
    """The highest ancestor of the leaf with a required level (None: no ancestor has one)."""
    top = None
    for ancestor in _ancestors(leaf, by_name):
        if ancestor.topology_constraint is not None and ancestor.topology_constraint.required_topology_level:
            top = ancestor
    return top


def _tightest(constraints: Sequence[KaiTopologyConstraint], tiers: Mapping[str, int]) -> NetworkConstraint | None:
    """The tightest required level among them (an unknown level first: the search then names it)."""
    levels = sorted(
        {c.required_topology_level for c in constraints if c.required_topology_level},
        key=lambda level: (level in tiers, tiers.get(level, 0), level),
    )
    if not levels:
        return None
    return NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=levels[0])
