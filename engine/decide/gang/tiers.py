"""The tier walk's pieces (Volcano's gradient search): the limit a constraint sets, where running
members pin the gang, and the hypernodes of a tier whose slots cover every shape."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import msgspec

from engine.cluster.network import NetworkTree
from engine.cluster.network.cliques import PREFIX as CLIQUE_PREFIX
from engine.core.model import PodRequest
from engine.node.vendor import RequestError
from schemas.events import NetworkConstraint, TopologyMode

HOSTNAME = "kubernetes.io/hostname"
NODE_TIER = -1  # the limit of a level named by the node's own label: one node (Kueue's, KAI's, KEP-5732's)


def limit_of(tree: NetworkTree, network: NetworkConstraint | None, field: str) -> tuple[bool, int]:
    """(hard, highest tier allowed); no constraint = soft up to the top of the tree; `kubernetes.io/hostname`
    (a tree's lowest level is the node itself) = NODE_TIER."""
    top = tree.tiers[-1]
    if network is None:
        return False, top
    highest = top
    if network.highest_tier is not None:
        highest = network.highest_tier
    elif network.highest_tier_name == HOSTNAME and HOSTNAME not in tree.tier_names:
        highest = NODE_TIER
    elif network.highest_tier_name:
        try:
            highest = tree.tier_named(network.highest_tier_name)
        except KeyError:  # a name several tiers carry (trees of mixed depth): the highest of them
            carried = [tree.tier_of(h) for h in tree.hypernodes if tree.tier_name_of(h) == network.highest_tier_name]
            if not carried:
                known = ", ".join(sorted(tree.tier_names)) or "none"
                reason = f"no tier is named {network.highest_tier_name!r} (known: {known})"
                raise RequestError(f"{field}.highestTierName", reason) from None
            highest = max(carried)
    return network.mode is TopologyMode.HARD, highest


class NamedDomains(msgspec.Struct, frozen=True, kw_only=True):
    """The node ranges of the hypernodes carrying a hard constraint's tierName (the outermost, disjoint):
    with several trees (fabrics, node pools, mixed depths) a name is resolved in the trees that have it,
    and a domain must lie inside one of them."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def holds(self, start: int, end: int) -> bool:
        i = bisect_right(self.starts, start) - 1
        return i >= 0 and end <= self.ends[i] and end > start


def clique_domains(tree: NetworkTree) -> tuple[int, NamedDomains] | None:
    """The NVLink cliques' tier and node ranges (None: no node is in a clique)."""
    spans = sorted(tree.node_range(h) for h in tree.hypernodes if h.startswith(CLIQUE_PREFIX))
    if not spans:
        return None
    tier = min(tree.tier_of(h) for h in tree.hypernodes if h.startswith(CLIQUE_PREFIX))
    return tier, NamedDomains(starts=tuple(a for a, _ in spans), ends=tuple(b for _, b in spans))


def named_domains(tree: NetworkTree, network: NetworkConstraint | None) -> NamedDomains | None:
    """The domains a hard constraint's tierName allows (None: no name, soft, or no hypernode carries it)."""
    if network is None or network.mode is not TopologyMode.HARD or not network.highest_tier_name:
        return None
    name = network.highest_tier_name
    spans = sorted(tree.node_range(h) for h in tree.hypernodes if tree.tier_name_of(h) == name)
    outer: list[tuple[int, int]] = []
    for a, b in spans:
        if outer and b <= outer[-1][1]:
            continue  # inside one already kept
        outer.append((a, b))
    if not outer:
        return None
    return NamedDomains(starts=tuple(a for a, _ in outer), ends=tuple(b for _, b in outer))


class Pin(msgspec.Struct, frozen=True, kw_only=True):
    """Where running members pin the gang: their lowest common hypernode, and the domain allowed around it."""

    lca: str | None = None
    domain: str | None = None
    within: NamedDomains | None = None  # the hypernodes its constraint's tierName allows


def pin_of(tree: NetworkTree, running: Sequence[PodRequest], hard: bool, max_tier: int) -> Pin:
    nodes = [p.node_name for p in running if tree.is_node(p.node_name)]
    if not nodes:
        return Pin()
    lca = tree.lca(nodes)
    if not hard:
        return Pin(lca=lca)
    if max_tier == NODE_TIER:  # on their one node; already on several: stay where they are
        return Pin(lca=lca, domain=nodes[0] if len(set(nodes)) == 1 else lca)
    if tree.tier_of(lca) > max_tier:
        return Pin(lca=lca, domain=lca)  # already spread past the limit: stay where they are
    domain = tree.ancestor_at_tier(nodes[0], max_tier)
    return Pin(lca=lca, domain=domain if domain is not None else lca)


def _pinned(tree: NetworkTree, name: str, pin: Pin) -> bool:
    """Whether the hypernode holds the running members and lies inside their allowed domain."""
    if pin.lca is not None and not (name == pin.lca or is_within(tree, pin.lca, name)):
        return False
    if pin.within is not None and not pin.within.holds(*tree.node_range(name)):
        return False
    return pin.domain is None or name == pin.domain or is_within(tree, name, pin.domain)


def tier_candidates(
    tree: NetworkTree, tier: int, pin: Pin, totals: dict[bytes, tuple[int, ...]], need: dict[bytes, int]
) -> list[str]:
    """The tier's hypernodes whose slots cover every shape, holding the running members and inside their
    allowed domain; tightest first (Volcano's binpack), then by name."""
    ids: Sequence[int] = tree.hypernode_ids_at(tier)
    for key, n in need.items():
        column = totals[key]
        ids = [i for i in ids if column[i] >= n]
    out: list[tuple[int, str]] = []
    for i in ids:
        name = tree.hypernodes[i]
        if _pinned(tree, name, pin):
            out.append((sum(totals[key][i] for key in need), name))
    out.sort()
    return [name for _, name in out]


def minimum_candidates(
    tree: NetworkTree, tier: int, pin: Pin, totals: dict[bytes, tuple[int, ...]], need: dict[bytes, int], least: int
) -> list[str]:
    """The tier's pinned hypernodes whose slots hold at least `least` pending members; those holding the
    most first (the rest of the gang joins there later), then by name."""
    out: list[tuple[int, str]] = []
    for i in tree.hypernode_ids_at(tier):
        name = tree.hypernodes[i]
        room = sum(min(totals[key][i], n) for key, n in need.items())
        if room >= least and _pinned(tree, name, pin):
            out.append((-room, name))
    out.sort()
    return [name for _, name in out]


def domain_tier(tree: NetworkTree, name: str) -> int:
    """A hypernode's tier, or NODE_TIER for a node."""
    return NODE_TIER if tree.is_node(name) else tree.tier_of(name)


def span(tree: NetworkTree, name: str) -> tuple[int, int]:
    """`[start, end)` of a hypernode's nodes, or of a node itself."""
    if tree.is_node(name):
        i = tree.node_index(name)
        return i, i + 1
    return tree.node_range(name)


def is_within(tree: NetworkTree, inner: str, outer: str) -> bool:
    """Whether hypernode (or node) `inner` lies inside `outer` (its node range inside)."""
    a, b = span(tree, inner)
    c, d = span(tree, outer)
    return c <= a and b <= d and b > a


def most_slots(tree: NetworkTree, tier: int, totals: dict[bytes, tuple[int, ...]], need: dict[bytes, int]) -> int:
    best = 0
    for name in tree.hypernodes_at(tier):
        i = tree.hypernode_index(name)
        best = max(best, min(min(totals[key][i], n) for key, n in need.items()) if need else 0)
    return best
