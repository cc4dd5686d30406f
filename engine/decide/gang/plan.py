"""A plan inside one candidate hypernode: members fill it child domain by child domain, the fullest
first, so they share low hypernodes; a subgroup first takes the smallest domain within its own limit."""

from __future__ import annotations

import msgspec

from engine.cluster.network import NetworkTree
from engine.core.model import PodRequest
from engine.decide.gang.slots import Shape
from engine.decide.gang.tiers import is_within, limit_of
from engine.node.answer import NodeFit
from schemas.events import SubGroupPolicy

MAX_PLANNED = 8  # candidate hypernodes of one tier planned in full; the rest are pruned by slots


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    hypernode: str
    assignments: tuple[tuple[str, str, int], ...]  # (member uid, node, fit number on that node)
    score: float
    free_after: int


def _fill_order(tree: NetworkTree, hypernode: str, free: dict[str, int], anchor: str | None) -> list[str]:
    """The candidate's nodes in the order members fill them: the anchor's domain first, then child
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


def plan_in(
    tree: NetworkTree,
    hypernode: str,
    shapes: list[Shape],
    per_node: dict[bytes, list[int]],
    fits: dict[tuple[bytes, str], tuple[NodeFit, ...]],
    sub_groups: tuple[SubGroupPolicy, ...],
    anchor: str | None,
) -> Plan | None:
    """Members on nodes of `hypernode`, or None when they do not all fit.

    A node serves one shape only (each shape's slots assume the node as it is now)."""
    taken: set[str] = set()  # nodes given to an earlier shape
    assignments: list[tuple[str, str, int]] = []
    score = 0.0
    left = 0
    start, end = tree.node_range(hypernode)
    for shape in shapes:
        values = per_node[shape.key]
        free = {tree.nodes[i]: values[i] for i in range(start, end) if values[i] and tree.nodes[i] not in taken}
        used: dict[str, int] = {}
        for group in _subgroups(shape.members, sub_groups):
            domain = _group_domain(tree, hypernode, group, free, sub_groups) if sub_groups else hypernode
            if domain is None:
                return None
            remaining = list(reversed(group))  # popped from the end: name order
            for node in _fill_order(tree, domain, free, anchor):
                while remaining and free[node] > 0:
                    nth = used.get(node, 0)
                    used[node] = nth + 1
                    free[node] -= 1
                    assignments.append((remaining.pop().uid, node, nth))
                    score += fits[(shape.key, node)][nth].score.score
                if not remaining:
                    break
            if remaining:
                return None
        taken.update(used)
        left += sum(free.values())
    return Plan(hypernode=hypernode, assignments=tuple(assignments), score=round(score, 6), free_after=left)


def _subgroups(members: list[PodRequest], policies: tuple[SubGroupPolicy, ...]) -> list[list[PodRequest]]:
    """Members split by the first policy: by its label values, then in chunks of its size (name order)."""
    if not policies:
        return [members]
    policy = policies[0]
    by_labels: dict[tuple[str, ...], list[PodRequest]] = {}
    for member in members:
        by_labels.setdefault(tuple(member.labels.get(k, "") for k in policy.match_label_keys), []).append(member)
    groups: list[list[PodRequest]] = []
    for _, group in sorted(by_labels.items()):
        size = policy.sub_group_size or len(group)
        groups.extend(group[i : i + size] for i in range(0, len(group), size))
    return groups


def _group_domain(
    tree: NetworkTree,
    hypernode: str,
    group: list[PodRequest],
    free: dict[str, int],
    policies: tuple[SubGroupPolicy, ...],
) -> str | None:
    """The smallest domain inside `hypernode`, within the subgroup's tier limit, with room for the group."""
    network = policies[0].network
    hard, limit = limit_of(tree, network, "subGroupPolicy.networkTopology")
    best: tuple[int, int, str] | None = None
    start, end = tree.node_range(hypernode)
    for name in tree.hypernodes:
        tier = tree.tier_of(name)
        if tier > limit and hard:
            continue
        a, b = tree.node_range(name)
        if not (start <= a and b <= end and b > a):
            continue
        room = sum(free.get(n, 0) for n in tree.nodes[a:b])
        if room >= len(group):
            key = (tier, room, name)
            if best is None or key < best:
                best = key
    if best is None and not hard:
        return hypernode
    return None if best is None else best[2]
