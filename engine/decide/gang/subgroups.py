"""A gang's subgroups, as Volcano forms them from every subGroupPolicy (and Kueue's slices).

A member belongs to the first policy (in the PodGroup's order) whose `labelSelector` selects it
(no selector: every member) and, when the policy has `matchLabelKeys`, that finds every key with
a non-empty value; its subgroup is the members of that policy with the same values. A policy
without keys groups what it selects in slices of `subGroupSize` in rank order (Kueue's podset
slices), or all of it in one subgroup when it has no size. Members no policy takes are the gang's
own. A subgroup is ready once `subGroupSize` of its members run (a slice: all of them); a policy
with `minSubGroups` needs that many ready subgroups, and those come first (Volcano's required
subJobs), then the others, policy by policy, in the order of their values (numbers by value).

A policy with a `parent` divides each subgroup of that policy the same way, among its members
only (KAI's nested subgroups, Kueue's multi-layer slices): the subgroup's `children`, each laid
out inside the domain its parent takes (members no child policy takes form a child of their own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from engine.core.model import PodRequest
from engine.decide.gang.ranks import member_key, natural_key
from schemas.events import LabelSelector, NetworkConstraint, SubGroupPolicy

GANG_UNIT = -1  # the policy number of the gang's own members


class Unit(msgspec.Struct, frozen=True, kw_only=True):
    """Members placed together inside one domain of their own limit (a subgroup, or the gang's own)."""

    name: str  # "<policy>/<values>", "<policy>/slice-<n>", or "" for the gang's own members
    policy: int  # the number of its subGroupPolicy; GANG_UNIT for the gang's own
    pending: tuple[PodRequest, ...]  # rank order
    running: tuple[PodRequest, ...] = ()
    minimum: int = 1  # members (running ones included) that make it ready
    network: NetworkConstraint | None = None
    required: bool = False  # one of the subgroups its policy's minSubGroups asks for
    children: tuple[Unit, ...] = ()  # its members divided by the policies whose parent is its policy


def selects(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector over a pod's labels: every label and expression holds (empty: everything)."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


def _policy_of(policies: Sequence[SubGroupPolicy], pod: PodRequest) -> tuple[int, tuple[str, ...]] | None:
    """The first top-level policy that takes the pod, and its values."""
    return _first_policy(policies, pod, [n for n, p in enumerate(policies) if not p.parent])


def _first_policy(
    policies: Sequence[SubGroupPolicy], pod: PodRequest, numbers: Sequence[int]
) -> tuple[int, tuple[str, ...]] | None:
    for number in numbers:
        policy = policies[number]
        if policy.label_selector is not None and not selects(policy.label_selector, pod.labels):
            continue
        if not policy.match_label_keys:
            return number, ()
        values = tuple(pod.labels.get(k, "") for k in policy.match_label_keys)
        if all(values):
            return number, values
    return None


def _values_key(values: tuple[str, ...]) -> tuple[bool, int, tuple[tuple[tuple[str, int], ...], ...]]:
    """Volcano's matchIndex: the first value as a number first, then every value in natural order."""
    first = values[0] if values else ""
    numeric = first.isascii() and first.isdigit()
    return (not numeric, int(first) if numeric else 0, tuple(natural_key(v) for v in values))


def units_of(
    policies: Sequence[SubGroupPolicy], pending: Sequence[PodRequest], running: Sequence[PodRequest]
) -> tuple[list[Unit], Unit]:
    """Every subgroup (required ones first; those with nothing pending too) and the gang's own members."""
    grouped: dict[tuple[int, tuple[str, ...]], list[PodRequest]] = {}
    own: list[PodRequest] = []
    for pod in sorted([*pending, *running], key=member_key):
        found = _policy_of(policies, pod)
        if found is None:
            own.append(pod)
        else:
            grouped.setdefault(found, []).append(pod)
    units = _required_first(policies, _grouped_units(policies, grouped, ""))
    gang_own = _unit("", GANG_UNIT, own, 1)
    return units, gang_own


def _grouped_units(
    policies: Sequence[SubGroupPolicy], grouped: dict[tuple[int, tuple[str, ...]], list[PodRequest]], prefix: str
) -> list[Unit]:
    """The subgroups of each (policy, values) group of members, in policy then value order, with children."""
    units: list[Unit] = []
    for (number, values), members in sorted(grouped.items(), key=lambda kv: (kv[0][0], _values_key(kv[0][1]))):
        policy = policies[number]
        label = prefix + (policy.name or str(number))
        if policy.match_label_keys or not policy.sub_group_size:
            units.append(_unit(f"{label}/{'-'.join(values) or 'all'}", number, members, policy.sub_group_size or 1))
        else:
            size = policy.sub_group_size
            for n, start in enumerate(range(0, len(members), size)):
                chunk = members[start : start + size]
                units.append(_unit(f"{label}/slice-{n}", number, chunk, len(chunk)))
    return [
        msgspec.structs.replace(u, network=policies[u.policy].network, children=_children(policies, u)) for u in units
    ]


def _children(policies: Sequence[SubGroupPolicy], unit: Unit) -> tuple[Unit, ...]:
    """The unit's members divided by the policies whose parent is its policy (none: no children)."""
    name = policies[unit.policy].name
    numbers = [n for n, p in enumerate(policies) if p.parent and p.parent == name]
    if not numbers:
        return ()
    grouped: dict[tuple[int, tuple[str, ...]], list[PodRequest]] = {}
    rest: list[PodRequest] = []
    for pod in sorted([*unit.pending, *unit.running], key=member_key):
        found = _first_policy(policies, pod, numbers)
        if found is None:
            rest.append(pod)
        else:
            grouped.setdefault(found, []).append(pod)
    children = _grouped_units(policies, grouped, f"{unit.name}/")
    if rest:  # inside the parent's domain, with no constraint of their own
        children.append(_unit(f"{unit.name}/own", unit.policy, rest, len(rest)))
    return tuple(children)


def descendants(unit: Unit) -> list[Unit]:
    """Its children, theirs, and so on (parents before their children)."""
    return [d for child in unit.children for d in (child, *descendants(child))]


def leaves(unit: Unit) -> tuple[Unit, ...]:
    """The units that hold members themselves: the unit, or its children's leaves."""
    return tuple(leaf for child in unit.children for leaf in leaves(child)) if unit.children else (unit,)


def _unit(name: str, policy: int, members: list[PodRequest], minimum: int) -> Unit:
    return Unit(
        name=name,
        policy=policy,
        pending=tuple(p for p in members if not p.node_name),
        running=tuple(p for p in members if p.node_name),
        minimum=minimum,
    )


def _required_first(policies: Sequence[SubGroupPolicy], units: list[Unit]) -> list[Unit]:
    """Each policy's first not-yet-ready subgroups up to its minSubGroups marked required, and put first."""
    ready = {n: sum(1 for u in units if u.policy == n and len(u.running) >= u.minimum) for n in range(len(policies))}
    marked: list[Unit] = []
    for unit in units:
        wanted = policies[unit.policy].min_sub_groups - ready[unit.policy]
        if wanted > 0 and len(unit.running) < unit.minimum:
            ready[unit.policy] += 1
            unit = msgspec.structs.replace(unit, required=True)
        marked.append(unit)
    return sorted(marked, key=lambda u: not u.required)  # stable: policy and value order kept


def ready_count(units: Sequence[Unit], placed: Mapping[str, int], policy: int) -> int:
    """The policy's subgroups ready with `placed` (members placed now, by unit name) and those running."""
    return sum(1 for u in units if u.policy == policy and len(u.running) + placed.get(u.name, 0) >= u.minimum)
