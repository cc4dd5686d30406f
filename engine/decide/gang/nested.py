"""A subgroup with children (KAI's nested subgroups, Kueue's multi-layer slices) laid out in one plan:
the parent takes a domain within its own limit (the tightest first that has room for all its
members), and every child is laid out inside it within its own limit; a domain where one child
does not fit is undone and the next is tried, so no child ever leaves its parent's domain."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import msgspec

from engine.decide.gang.subgroups import Unit
from engine.decide.gang.tiers import domain_tier, is_within

if TYPE_CHECKING:  # plan.py calls in here: its types only, to keep the import one way
    from engine.decide.gang.plan import Layout, UnitLimit

PlaceLeaf = Callable[["Layout", Unit, "UnitLimit", bool], bool]
Domains = Callable[["Layout", "UnitLimit", dict[str, int]], list[tuple[int, str]]]


def place_nested(
    layout: Layout,
    unit: Unit,
    limit: UnitLimit,
    partial: bool,
    limits: Mapping[str, UnitLimit],
    place_leaf: PlaceLeaf,
    domains: Domains,
) -> bool:
    """Every child of `unit` inside one domain of the unit's limit; False when a whole gang cannot be."""
    free = layout.free_of({layout.shape_of[m.uid] for m in unit.pending})
    found = domains(layout, limit, free)
    mark = layout.mark()
    for room, domain in found:
        if room < len(unit.pending):
            continue
        if _children_in(layout, unit, domain, False, limits, place_leaf, domains):
            return True
        layout.reset(mark)
    if not partial or not found:
        return False
    roomiest = min(found, key=lambda rd: (-rd[0], domain_tier(layout.tree, rd[1]), rd[1]))[1]
    _children_in(layout, unit, roomiest, True, limits, place_leaf, domains)
    return True


def _children_in(
    layout: Layout,
    unit: Unit,
    domain: str,
    partial: bool,
    limits: Mapping[str, UnitLimit],
    place_leaf: PlaceLeaf,
    domains: Domains,
) -> bool:
    for child in unit.children:
        if not child.pending:
            continue
        limit = _inside(layout, limits[child.name], domain)
        if limit is None:
            return False
        if child.children:
            placed = place_nested(layout, child, limit, partial, limits, place_leaf, domains)
        else:
            placed = place_leaf(layout, child, limit, partial)
        if not placed:
            return False
    return True


def _inside(layout: Layout, limit: UnitLimit, domain: str) -> UnitLimit | None:
    """The child's limit kept inside the parent's domain (None: its running members pin it elsewhere)."""
    allowed = limit.allowed
    tree = layout.tree
    if allowed is None or allowed == domain or is_within(tree, domain, allowed):
        return msgspec.structs.replace(limit, allowed=domain)
    if is_within(tree, allowed, domain):
        return limit
    return None
