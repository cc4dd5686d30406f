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

Every subgroup is a subgroup policy with its own constraint. One that holds pods (no other names it
as `parent`) takes the members labelled with its name; it is ready at its `minMember`, and every
one is required (KAI places a PodGroup only with each subgroup at its minimum; `minMember: 0`, an
elastic segment, is not). A parent takes the members of every subgroup under it, as one subgroup
whose domain holds its children's (the policy's `parent`: the subgroups are nested).

Segments: KAI's pod-grouper writes `kai.scheduler/segment-size` and
`kai.scheduler/segment-topology-required-placement` / `-preferred-placement` as subgroups; a
PodGroup without subgroups whose pods carry them gets them read here: slices of that many pods in
rank order (the pod index), each inside the level, `minMember / segment-size` of them required.
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
KAI_SEGMENT_SIZE = "kai.scheduler/segment-size"
KAI_SEGMENT_REQUIRED = "kai.scheduler/segment-topology-required-placement"
KAI_SEGMENT_PREFERRED = "kai.scheduler/segment-topology-preferred-placement"


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
    group: KaiPodGroup, pod_annotations: Mapping[str, str]
) -> tuple[NetworkConstraint | None, tuple[SubGroupPolicy, ...]]:
    """The PodGroup's network constraint and its subgroups as nested policies; FieldError names a bad field."""
    by_name = _check(group)
    children: dict[str, list[str]] = {}
    for sub in group.spec.sub_groups:
        if sub.parent is not None:
            children.setdefault(sub.parent, []).append(sub.name)

    def leaves_under(name: str) -> list[str]:
        below = children.get(name, [])
        return [leaf for child in below for leaf in leaves_under(child)] if below else [name]

    policies: list[SubGroupPolicy] = []
    for sub in _parents_first(group.spec.sub_groups, by_name):
        leaf = sub.name not in children
        names = tuple(leaves_under(sub.name))
        policies.append(
            SubGroupPolicy(
                name=sub.name,
                sub_group_size=sub.min_member if leaf else 0,
                min_sub_groups=1 if leaf and sub.min_member > 0 else 0,
                match_label_keys=(KAI_SUBGROUP_LABEL,) if leaf else (),
                label_selector=LabelSelector(
                    match_expressions=(LabelSelectorRequirement(key=KAI_SUBGROUP_LABEL, operator="In", values=names),)
                ),
                network=network_of(sub.topology_constraint),
                parent=sub.parent or "",
            )
        )
    if not policies and KAI_SEGMENT_SIZE in pod_annotations:
        policies.append(_segments(group, pod_annotations))
    return network_of(constraint_of(group, pod_annotations)), tuple(policies)


def _segments(group: KaiPodGroup, notes: Mapping[str, str]) -> SubGroupPolicy:
    field = f"metadata.annotations[{KAI_SEGMENT_SIZE}]"
    text = notes[KAI_SEGMENT_SIZE]
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise FieldError(field, f"must be a whole number of at least 1, got {text!r}")
    size = int(text)
    level = KaiTopologyConstraint(
        required_topology_level=notes.get(KAI_SEGMENT_REQUIRED, ""),
        preferred_topology_level=notes.get(KAI_SEGMENT_PREFERRED, ""),
    )
    return SubGroupPolicy(
        name="segment", sub_group_size=size, min_sub_groups=group.spec.min_member // size, network=network_of(level)
    )


def _parents_first(subs: Sequence[KaiSubGroup], by_name: Mapping[str, KaiSubGroup]) -> list[KaiSubGroup]:
    """The subgroups, each after its parent, otherwise in the PodGroup's order."""

    def depth(sub: KaiSubGroup) -> int:
        return 0 if sub.parent is None else 1 + depth(by_name[sub.parent])

    return sorted(subs, key=depth)
