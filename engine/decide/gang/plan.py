"""A plan inside one candidate hypernode: each subgroup first takes the smallest domain within its own
limit that holds it, then the gang's own members fill the candidate; members go in rank order, node by
node in the domain's fill order (the running members' domain first, then child domains with the most
free slots, depth first), so consecutive ranks share a node, then a leaf, then the next tier up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import msgspec

from engine.cluster.network import NetworkTree
from engine.core.model import PodRequest
from engine.decide.gang.joint import PlacedMembers
from engine.decide.gang.nested import place_nested
from engine.decide.gang.subgroups import GANG_UNIT, Unit, descendants, ready_count
from engine.decide.gang.tiers import NODE_TIER, NamedDomains, domain_tier, is_within, span
from engine.node.answer import NodeFit

MAX_PLANNED = 8  # candidate hypernodes of one tier planned in full; the rest are pruned by slots


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    hypernode: str
    assignments: tuple[tuple[str, str, int], ...]  # (member uid, node, fit number on that node)
    score: float
    free_after: int
    placed: int = 0  # members placed (all pending ones unless the plan keeps only the minimum)


class UnitLimit(msgspec.Struct, frozen=True, kw_only=True):
    """A unit's resolved constraint: hard or soft, its highest tier, and the domain its running members allow."""

    hard: bool
    tier: int
    allowed: str | None = None  # hard: the pending members stay inside it (where running ones pin them)
    within: NamedDomains | None = None  # hard, by tierName: a domain inside a hypernode carrying that name


class LayoutMark(NamedTuple):
    owner: dict[int, bytes]
    used: dict[int, int]
    assigned: int  # assignments made by then
    score: float
    joint: PlacedMembers | None


class Layout:
    """The members laid out so far inside one candidate: which shape owns each node, and how many it took."""

    def __init__(
        self,
        tree: NetworkTree,
        hypernode: str,
        shape_of: dict[str, bytes],
        per_node: dict[bytes, list[int]],
        fits: dict[tuple[bytes, str], tuple[NodeFit, ...]],
        anchor: str | None,
        joint: PlacedMembers | None = None,
    ) -> None:
        """`joint`: the members' anti-affinity and spread against each other (None: they have none)."""
        self.tree, self.hypernode, self.shape_of, self.per_node, self.fits = tree, hypernode, shape_of, per_node, fits
        self.anchor = anchor
        self.joint = joint
        self.start, self.end = tree.node_range(hypernode)
        self.owner: dict[int, bytes] = {}  # node position -> the shape it serves (each node serves one)
        self.used: dict[int, int] = {}
        self.assignments: list[tuple[str, str, int]] = []
        self.score = 0.0

    def _free_by_position(self, key: bytes) -> dict[int, int]:
        """What each node of the candidate still takes of the shape (nodes another shape serves: none)."""
        values, owner, used = self.per_node[key], self.owner, self.used
        out: dict[int, int] = {}
        for i in range(self.start, self.end):
            room = values[i]
            if room and owner.get(i, key) == key:
                room -= used.get(i, 0)
                if room > 0:
                    out[i] = room
        return out

    def free_of(self, keys: set[bytes]) -> dict[str, int]:
        names = self.tree.nodes
        free: dict[str, int] = {}
        for key in keys:
            for i, room in self._free_by_position(key).items():
                free[names[i]] = free.get(names[i], 0) + room
        return free

    def trial(self, domain: str, members: Sequence[PodRequest], free: dict[str, int]) -> list[tuple[PodRequest, int]]:
        """Members (rank order) on the domain's nodes in fill order, as many as fit; nothing is kept yet."""
        index_of = self.tree.node_index
        if self.tree.is_node(domain):  # a unit limited to one node (NODE_TIER)
            order = [index_of(domain)]
        else:
            order = [index_of(n) for n in fill_order(self.tree, domain, free, self.anchor)]
        rooms: dict[bytes, dict[int, int]] = {}
        owner: dict[int, bytes] = {}  # nodes this trial gives a shape
        pointer: dict[bytes, int] = {}
        out: list[tuple[PodRequest, int]] = []
        placed = self.joint.copy() if self.joint is not None else None
        names = self.tree.nodes
        for member in members:
            key = self.shape_of[member.uid]
            room = rooms.get(key)
            if room is None:
                room = rooms[key] = self._free_by_position(key)
            i = pointer.get(key, 0)
            # A node the members placed so far refuse stays refused to this shape: the pointer passes it.
            while i < len(order) and (
                room.get(order[i], 0) <= 0
                or owner.get(order[i], key) != key
                or (placed is not None and not placed.allows(key, names[order[i]]))
            ):
                i += 1
            pointer[key] = i
            if i == len(order):
                continue
            pos = order[i]
            room[pos] -= 1
            owner[pos] = key
            if placed is not None:
                placed.add(key, names[pos])
            out.append((member, pos))
        return out

    def keep(self, trial: list[tuple[PodRequest, int]]) -> None:
        for member, pos in trial:
            key = self.shape_of[member.uid]
            nth = self.used.get(pos, 0)
            self.used[pos] = nth + 1
            self.owner[pos] = key
            node = self.tree.nodes[pos]
            if self.joint is not None:
                self.joint.add(key, node)
            self.assignments.append((member.uid, node, nth))
            self.score += self.fits[(key, node)][nth].score.score

    def mark(self) -> LayoutMark:
        """What is laid out so far, to go back to (engine.decide.gang.nested); the members' joint rules too."""
        joint = self.joint.copy() if self.joint is not None else None
        return LayoutMark(dict(self.owner), dict(self.used), len(self.assignments), self.score, joint)

    def reset(self, mark: LayoutMark) -> None:
        self.owner, self.used, self.score = dict(mark.owner), dict(mark.used), mark.score
        self.joint = mark.joint.copy() if mark.joint is not None else None
        del self.assignments[mark.assigned :]

    def free_after(self) -> int:
        return sum(sum(self._free_by_position(key).values()) for key in set(self.shape_of.values()))


def fill_order(tree: NetworkTree, hypernode: str, free: dict[str, int], anchor: str | None) -> list[str]:
    """The hypernode's nodes in the order members fill them: the anchor's domain first, then child
    domains with the most free slots first (fewest domains used), nodes by most slots, then name."""
    start, end = tree.node_range(hypernode)
    prefix = [0]
    for name in tree.nodes[start:end]:
        prefix.append(prefix[-1] + free.get(name, 0))

    def slots_under(h: str) -> int:
        a, b = tree.node_range(h)
        return prefix[b - start] - prefix[a - start]

    def walk(h: str) -> list[str]:
        nodes = sorted((n for n in tree.direct_nodes(h) if free.get(n, 0) > 0), key=lambda n: (-free[n], n))
        children = [(c, slots_under(c)) for c in tree.children(h)]
        first = anchor if anchor is not None else ""
        children.sort(key=lambda cs: (not _holds(tree, cs[0], first), -cs[1], cs[0]))
        for child, slots in children:
            if slots > 0:
                nodes.extend(walk(child))
        return nodes

    return walk(hypernode)


def _holds(tree: NetworkTree, hypernode: str, anchor: str) -> bool:
    return bool(anchor) and (hypernode == anchor or is_within(tree, anchor, hypernode))


def _domains(layout: Layout, limit: UnitLimit, free: dict[str, int]) -> list[tuple[int, str]]:
    """(room, name) of the hypernodes inside the candidate (and the allowed domain) within the unit's
    tier when hard, smallest tier first, then least room (the tightest), then name."""
    tree = layout.tree
    start, end = layout.start, layout.end
    if limit.allowed is not None:
        a, b = span(tree, limit.allowed)
        start, end = max(start, a), min(end, b)
    if limit.hard and limit.tier == NODE_TIER:  # one node: the tightest with room first
        return sorted((free[n], n) for n in tree.nodes[start:end] if free.get(n, 0) > 0)
    prefix = [0]
    for name in tree.nodes[start:end]:
        prefix.append(prefix[-1] + free.get(name, 0))
    out: list[tuple[int, int, str]] = []
    for name in tree.hypernodes:
        tier = tree.tier_of(name)
        a, b = tree.node_range(name)
        if (limit.hard and tier > limit.tier) or not (start <= a and b <= end and b > a):
            continue
        if limit.within is not None and not limit.within.holds(a, b):
            continue
        out.append((tier, prefix[b - start] - prefix[a - start], name))
    out.sort()
    return [(room, name) for _, room, name in out]


def _place_unit(layout: Layout, unit: Unit, limit: UnitLimit, partial: bool) -> bool:
    """The unit's pending members placed in one domain; False when a whole gang cannot be planned here."""
    free = layout.free_of({layout.shape_of[m.uid] for m in unit.pending})
    want = len(unit.pending)
    own = unit.policy == GANG_UNIT and limit.tier != NODE_TIER  # the gang's own members: the candidate itself
    domains = [(sum(free.values()), layout.hypernode)] if own else _domains(layout, limit, free)
    best: list[tuple[PodRequest, int]] = []
    for room, domain in domains:
        if room >= want:
            trial = layout.trial(domain, unit.pending, free)
            if len(trial) == want:
                best = trial
                break
    if len(best) < want and partial and domains:
        roomiest = min(domains, key=lambda rd: (-rd[0], domain_tier(layout.tree, rd[1]), rd[1]))[1]
        best = layout.trial(roomiest, unit.pending, free)
    if len(best) < want and not partial:
        return False
    if not partial or unit.policy == GANG_UNIT or len(best) + len(unit.running) >= unit.minimum:
        layout.keep(best)  # at the minimum, a subgroup below its own size keeps nothing (Volcano discards it)
    return True


def plan_in(
    layout: Layout,
    units: Sequence[tuple[Unit, UnitLimit]],
    *,
    partial: bool = False,
    minimum: int = 0,
    min_sub_groups: Sequence[int] = (),
    child_limits: Mapping[str, UnitLimit] | None = None,
) -> Plan | None:
    """Every unit laid out in the candidate, or None when the gang does not fit (`partial`: when fewer
    than `minimum` members, or fewer ready subgroups than a policy's minSubGroups, could be placed)."""
    placed: dict[str, int] = {}
    for unit, limit in units:
        if not unit.pending:
            continue
        before = len(layout.assignments)
        if unit.children:  # nested subgroups (child_limits: each child's own limit, by unit name)
            laid_out = place_nested(layout, unit, limit, partial, child_limits or {}, _place_unit, _domains)
        else:
            laid_out = _place_unit(layout, unit, limit, partial)
        if not laid_out:
            return None
        placed[unit.name] = len(layout.assignments) - before
    count = len(layout.assignments)
    if partial:
        plain = [u for u, _ in units]
        nested = [d for u in plain for d in descendants(u)]
        if nested:  # a nested policy's subgroups are ready by the members laid out in each
            kept = {uid for uid, _, _ in layout.assignments}
            placed.update({d.name: sum(1 for m in d.pending if m.uid in kept) for d in nested})
            plain += nested
        if count < max(minimum, 1) or any(
            ready_count(plain, placed, policy) < wanted for policy, wanted in enumerate(min_sub_groups)
        ):
            return None
    return Plan(
        hypernode=layout.hypernode,
        assignments=tuple(layout.assignments),
        score=round(layout.score, 6),
        free_after=layout.free_after(),
        placed=count,
    )
