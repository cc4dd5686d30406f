"""Why a gang is not lower, or not at all: each tier the walk went past, and every node's reason.

A tier is refused for one of three reasons: the running members already span a hypernode above
it; no hypernode of it has slots for every pending member (the best one is named, with how many
it holds); or some do, but no layout keeps each subgroup inside its limit and every member's
rules. An unplaced gang's kube-style count covers every node of the cluster, as kube-scheduler's
FitError does: a node that takes no member gives its own reasons, a node that takes some is in
no allowed domain that holds them all, and a node outside the network tree cannot be used.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree
from engine.decide.gang.request import TierRefusal
from engine.decide.gang.tiers import Pin, tier_candidates

WHOLE_CLUSTER = "the whole cluster"
OUTSIDE_THE_TREE = "node(s) were outside the network topology"


def tier_name(tree: NetworkTree, tier: int) -> str:
    """The tier's tierName (its first hypernode's), or WHOLE_CLUSTER for the tree's virtual top."""
    names = tree.hypernodes_at(tier)
    if names == (tree.virtual_top,):
        return WHOLE_CLUSTER
    return tree.tier_name_of(names[0]) if names else ""


def below_the_running(tree: NetworkTree, tier: int, lca: str) -> TierRefusal:
    reason = f"the running members already span {lca} (tier {tree.tier_of(lca)})"
    return TierRefusal(tier=tier, tier_name=tier_name(tree, tier), reason=reason)


def tier_refusal(
    tree: NetworkTree,
    tier: int,
    pin: Pin,
    totals: dict[bytes, tuple[int, ...]],
    need: dict[bytes, int],
    candidates: Sequence[str],
    planned: int,
) -> TierRefusal:
    """Why the tier holds no plan for the whole gang, given its candidates and how many were planned."""
    pending = sum(need.values())
    if candidates:
        reason = (
            f"{len(candidates)} hypernode(s) have room for all {pending} pending member(s), but in the {planned} "
            "planned no layout keeps each subgroup inside its limit and every member's rules"
        )
        return TierRefusal(tier=tier, tier_name=tier_name(tree, tier), reason=reason)
    pinned = pin.lca is not None or pin.domain is not None or pin.within is not None
    with_room = tier_candidates(tree, tier, Pin(), totals, need) if pinned else []  # else: none, as candidates
    if with_room:
        held = pin.domain or pin.lca
        inside = f"inside {held}, where the running members are" if held else "inside a domain its tierName allows"
        reason = f"{len(with_room)} hypernode(s) have room for all {pending} pending member(s), none of them {inside}"
        return TierRefusal(tier=tier, tier_name=tier_name(tree, tier), reason=reason)
    best_room, best = _most_room(tree, tier, totals, need)
    where = WHOLE_CLUSTER if best == tree.virtual_top else f"one hypernode ({best})"
    reason = f"at most {best_room} of {pending} pending member(s) fit in {where}"
    return TierRefusal(tier=tier, tier_name=tier_name(tree, tier), reason=reason)


def _most_room(
    tree: NetworkTree, tier: int, totals: dict[bytes, tuple[int, ...]], need: dict[bytes, int]
) -> tuple[int, str]:
    """The most pending members one hypernode of the tier holds, and the first such hypernode by name."""
    ids = tree.hypernode_ids_at(tier)
    if not ids:
        return 0, ""
    if len(need) == 1:  # one shape (the common gang): the largest column value, found at C speed
        ((key, n),) = need.items()
        column = totals[key]
        most = max(map(column.__getitem__, ids))
        first = next(i for i in ids if column[i] == most)
        return min(most, n), tree.hypernodes[first]
    best_room, best = -1, ""
    for i in ids:  # name order: the first of the best is named
        room = sum(min(totals[key][i], n) for key, n in need.items())
        if room > best_room:
            best_room, best = room, tree.hypernodes[i]
    return best_room, best


def refusals_text(refusals: Sequence[TierRefusal]) -> str:
    """`tier 1 (rack): at most 2 of 3 ...; tier 2: ...`."""
    return "; ".join(
        f"tier {r.tier}" + (f" ({r.tier_name})" if r.tier_name else "") + f": {r.reason}" for r in refusals
    )


def node_reasons(
    index: ClusterIndex, tree: NetworkTree, first_shape: Sequence[int], misses: Sequence[str], hard_tier: int | None
) -> list[str]:
    """Every node's reasons (a reason given by n nodes appears n times): `misses` are those of the tree's
    nodes that take no member of the first shape, `first_shape` its slots per tree node (in tree order).
    A node that takes some is in no hypernode of the hard limit's tier that holds the whole gang, or
    (no hard limit) has room for only part of it."""
    reasons = list(misses)
    taking = sum(1 for name, slots in zip(tree.nodes, first_shape, strict=True) if slots and name in index)
    if hard_tier is not None:
        reasons += [f"node(s) were in no hypernode of tier <= {hard_tier} that holds the whole gang"] * taking
    else:
        reasons += ["node(s) had room for only part of the gang"] * taking
    reasons += [OUTSIDE_THE_TREE] * sum(1 for name in index.names if not tree.is_node(name))
    return reasons
