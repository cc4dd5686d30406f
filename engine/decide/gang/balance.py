"""Kueue's balanced placement (feature gate `TASBalancedPlacement`, Kueue's tas_balanced_placement.go):
a pod set with a preferred level that needs several domains gets about as many pods in each, instead
of the fullest domains filled first. Kueue's steps, with its tie-breaks:

1. the groups: the preferred level's domains under one domain a level up (under the top: all of them);
2. per group, the greedy count: the domains one level below the preferred one (the preferred level
   itself when the slices are counted there), most slices first, until the pod set's slices are
   covered; the threshold = slices / domains used, at most what the last one used holds;
3. the group's domains below the threshold pruned (the children, then the preferred-level domains);
   the group must still hold the pod set; best: the highest threshold, then the fewest preferred-level
   domains the greedy count uses, then the first group by name;
4. the fewest preferred-level domains that hold it (the greedy count) of the least room left over
   (Kueue's dynamic program, the most slices then the most even children first), then among their
   children the fewest of the least room; each takes the threshold, and the slices left over go to the
   roomiest first;
5. below, Kueue's descent: a domain's count over its children, most slices first, the last one the
   tightest that takes the rest.

The lowest level is the node (Kueue's `kubernetes.io/hostname` level); pods are counted in slices
of the pod set's slice size at its slice level (one pod, at the nodes, without slices); with multi-layer
slices the outer layer is balanced, each inner layer's size holding between it and the layer above. None
from any step: Kueue falls back to its best fit, the gang search's own walk here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from engine.cluster.network import NetworkTree
from engine.decide.gang.plan import Plan
from engine.decide.gang.request import GangRequest
from engine.decide.gang.slots import Shape
from engine.decide.gang.tiers import NODE_TIER, limit_of
from engine.node.answer import NodeFit
from schemas.events import TopologyMode


class BalanceRequest(NamedTuple):
    """One pod set: `members` pods in slices of `size` at `slice_tier`, preferring `preferred_tier`
    (NODE_TIER: the node itself), `slots` what each node of the tree takes (tree order)."""

    preferred_tier: int
    slice_tier: int
    size: int
    members: int
    slots: Sequence[int]
    # Kueue's inner slice layers (multi-layer slices), outer first: (tier, size), each below the one before
    inner: tuple[tuple[int, int], ...] = ()

    def inner_size(self, tier: int) -> int:
        """An inner layer's slice size at a level (0: none), as Kueue's sliceSizeAtLevel: each layer's size
        from just below the layer above it down to its own level."""
        above = self.slice_tier
        for layer_tier, size in self.inner:
            if layer_tier <= tier < above:
                return size
            above = layer_tier
        return 0


class _Domain:
    """A domain's room while the algorithm runs: pods and slices it takes (Kueue's domainState)."""

    __slots__ = ("above_slice", "at_slice", "children", "inner", "key", "name", "node", "pods", "slices")

    def __init__(self, name: str, key: tuple[str, ...], node: bool, at_slice: bool, above_slice: bool) -> None:
        self.name, self.key, self.node = name, key, node
        self.at_slice, self.above_slice = at_slice, above_slice
        self.children: list[_Domain] = []
        self.pods = 0
        self.slices = 0
        self.inner = 0  # an inner slice layer's size at this level (0: none)


class _Builder:
    def __init__(self, tree: NetworkTree, request: BalanceRequest) -> None:
        self.tree, self.request = tree, request

    def build(self, name: str, key: tuple[str, ...] = ()) -> _Domain:
        """The domain and everything below it, its counts filled in (a fresh copy every call)."""
        tree, slice_tier = self.tree, self.request.slice_tier
        key = (*key, name)
        if tree.is_node(name):
            leaf = _Domain(name, key, True, slice_tier == NODE_TIER, False)
            leaf.pods = self.request.slots[tree.node_index(name)]
            leaf.inner = self.request.inner_size(NODE_TIER)
            _sum(leaf, self.request.size, rounded=True)
            return leaf
        tier = tree.tier_of(name)
        domain = _Domain(name, key, False, tier == slice_tier, slice_tier == NODE_TIER or tier > slice_tier)
        domain.inner = self.request.inner_size(tier)
        domain.children = [self.build(child, key) for child in (*tree.children(name), *tree.direct_nodes(name))]
        _sum(domain, self.request.size, rounded=True)
        return domain

    def groups(self) -> list[list[str]]:
        """The preferred level's domains, grouped under their parent (parents by name)."""
        tree, tier = self.tree, self.request.preferred_tier
        members = list(tree.nodes) if tier == NODE_TIER else list(tree.hypernodes_at(tier))
        by_parent: dict[str, list[str]] = {}
        for name in members:
            by_parent.setdefault(tree.parent(name) or "", []).append(name)
        return [sorted(by_parent[parent]) for parent in sorted(by_parent)]


def _sum(domain: _Domain, size: int, *, rounded: bool) -> None:
    """Kueue's fillInCountsHelper for one domain, its children counted: pods summed up; slices summed above
    the slice level, counted at it; `rounded` (the first count, not the pruning's): a child of an inner
    layer gives whole inner slices only."""
    if domain.children:
        domain.pods = sum(c.pods // c.inner * c.inner if rounded and c.inner else c.pods for c in domain.children)
        domain.slices = sum(c.slices for c in domain.children)
    if domain.at_slice:
        domain.slices = domain.pods // size


def _count(domain: _Domain, size: int) -> None:
    """The domain counted again from its nodes up (the pruning's count: no rounding)."""
    for child in domain.children:
        _count(child, size)
    _sum(domain, size, rounded=False)


def _clear(domain: _Domain) -> None:
    domain.pods = domain.slices = 0
    for child in domain.children:
        _clear(child)


def _most_slices(domains: Sequence[_Domain]) -> list[_Domain]:
    """Kueue's sortedDomains (best fit): most slices, then fewest pods, then by name."""
    return sorted(domains, key=lambda d: (-d.slices, d.pods, d.key))


def _greedy(domains: Sequence[_Domain], slice_count: int) -> tuple[bool, int, _Domain | None]:
    """Kueue's evaluateGreedyAssignment: (fits, domains used, the last one used)."""
    remaining, used, last = slice_count, 0, None
    for domain in _most_slices(domains):
        if remaining <= 0 or domain.slices <= 0:
            break
        used, last = used + 1, domain
        remaining -= domain.slices
    return remaining <= 0, used, last


def _entropy(domain: _Domain) -> float:
    total = sum(c.pods for c in domain.children)
    if total == 0:
        return 0.0
    return -sum(c.pods / total * math.log2(c.pods / total) for c in domain.children if c.pods > 0)


def _fewest(domains: Sequence[_Domain], slice_count: int, size: int, by_entropy: bool) -> list[_Domain] | None:
    """Kueue's selectOptimalDomainSetToFit: as few domains as the greedy count uses, of the least room left
    over; the first such set in Kueue's order (most slices, most even children, name; or by name)."""
    fits, fewest, _ = _greedy(domains, slice_count)
    if not fits:
        return None
    if by_entropy:
        ordered = sorted(domains, key=lambda d: (-d.slices, -_entropy(d), d.key))
    else:
        ordered = sorted(domains, key=lambda d: d.key)
    # sets[i]: pods still wanted after i domains -> (pods wanted before the last of them, that domain) of
    # the first set of i domains found to leave that many; one domain's steps reach distinct keys, so the
    # order they are taken in does not matter, only the order of the domains
    sets: list[dict[int, tuple[int, int]]] = [{} for _ in range(fewest + 1)]
    sets[0][slice_count * size] = (0, -1)
    for number, domain in enumerate(ordered):
        if domain.slices <= 0:
            continue
        for i in range(fewest, 0, -1):
            found = sets[i]
            for before in [b for b in sets[i - 1] if b > 0]:
                found.setdefault(before - domain.pods, (before, number))
    done = [left for left in sets[fewest] if left <= 0]
    if not done:
        return None
    chosen: list[_Domain] = []
    left = max(done)
    for i in range(fewest, 0, -1):
        left, number = sets[i][left]
        chosen.append(ordered[number])
    return chosen[::-1]


def _balanced(domains: Sequence[_Domain], slice_count: int, size: int, threshold: int) -> list[_Domain] | None:
    """Kueue's placeSlicesOnDomainsBalanced: each chosen domain takes the threshold, the rest the roomiest first."""
    chosen = _fewest(domains, slice_count, size, by_entropy=False)
    if chosen is None or slice_count < len(chosen) * threshold:
        return None
    extra = slice_count - len(chosen) * threshold
    chosen = _most_slices(chosen)
    for domain in chosen:
        take = min(domain.slices - threshold, extra) if extra > 0 else 0
        domain.slices = threshold + take
        domain.pods = domain.slices * size
        extra -= take
    return None if extra > 0 else chosen


def _prune(domains: Sequence[_Domain], threshold: int, size: int) -> None:
    """Kueue's pruneDomainsBelowThreshold: children below the threshold go, then the domains themselves."""
    for domain in domains:
        for child in domain.children:
            if child.slices < threshold:
                _clear(child)
    for domain in domains:
        _count(domain, size)
        if domain.slices < threshold:
            _clear(domain)


class _Best(NamedTuple):
    domains: list[_Domain]
    threshold: int


def _best_group(builder: _Builder, slice_count: int, above: bool) -> _Best | None:
    """Kueue's findBestDomainsForBalancedPlacement: the group of the highest threshold (module docstring)."""
    size = builder.request.size
    best: _Best | None = None
    best_threshold = best_count = 0
    for group in builder.groups():
        domains = [builder.build(name) for name in group]
        lower = [c for d in domains for c in d.children] if above else domains
        fits, used, last = _greedy(lower, slice_count)
        if not fits:
            continue
        threshold = min(slice_count // used, last.slices if last is not None else slice_count)
        if threshold < best_threshold:
            continue
        _prune(domains, threshold, size)
        fits, count, _ = _greedy(domains, slice_count)
        if fits and (threshold > best_threshold or count < best_count):
            best, best_threshold, best_count = _Best(domains, threshold), threshold, count
    return best if best_threshold > 0 else None


def _fill(domains: list[_Domain], count: int, size: int) -> list[_Domain] | None:
    """Kueue's updateCountsToMinimumGeneric (no leaders): the domains in order, each full, the last the
    tightest of the rest that takes what is left; counted in slices of `size` when it is above one."""

    def room(d: _Domain) -> int:
        return d.slices if size > 1 else d.pods

    def tightest(rest: Sequence[_Domain], wanted: int) -> _Domain:
        fitting = [d for d in rest if room(d) >= wanted]
        return min(fitting, key=room) if fitting else rest[0]  # min: the first of the tightest

    remaining = count // size if size > 1 else count
    out: list[_Domain] = []
    for i, domain in enumerate(domains):
        if remaining == 0:
            return out
        if room(domain) >= remaining:
            domain = tightest(domains[i:], remaining)
        takes = min(room(domain), remaining)
        domain.pods = takes * size if size > 1 else takes
        if size > 1:
            domain.slices = takes
        out.append(domain)
        remaining -= takes
    return out if remaining == 0 else None


def _descend(domains: list[_Domain], size: int) -> dict[str, int] | None:
    """Each domain's count down to its nodes (Kueue's descent below the balanced level)."""
    out: dict[str, int] = {}
    frontier = domains
    while frontier:
        below: list[_Domain] = []
        for domain in frontier:
            if domain.node:
                if domain.pods:
                    out[domain.name] = domain.pods
                continue
            children = _most_slices(domain.children)
            step = size if domain.above_slice else max((c.inner for c in children), default=0) or 1
            if step > 1:  # the children's slices counted again in this size, as Kueue does
                for child in children:
                    child.slices = child.pods // step
            filled = _fill(children, domain.pods, step)
            if filled is None:
                return None
            below.extend(filled)
        frontier = below
    return out


def balanced_counts(tree: NetworkTree, request: BalanceRequest) -> dict[str, int] | None:
    """Pods per node as Kueue's balanced placement lays the pod set out, or None (Kueue falls back)."""
    preferred, slice_tier, size, count = request.preferred_tier, request.slice_tier, request.size, request.members
    if size < 1 or count < 1 or count % size:
        return None
    if preferred != NODE_TIER and preferred not in tree.tiers:
        return None
    above = preferred != NODE_TIER and (slice_tier == NODE_TIER or preferred > slice_tier)
    if not above and preferred != slice_tier:
        return None  # the slice level above the preferred one: Kueue refuses the request
    slice_count = count // size
    builder = _Builder(tree, request)
    best = _best_group(builder, slice_count, above)
    if best is None:
        return None
    fit = best.domains
    if above:
        chosen = _fewest(fit, slice_count, size, by_entropy=True)
        if chosen is None:
            return None
        fit = [c for d in chosen for c in d.children]
    placed = _balanced(fit, slice_count, size, best.threshold)
    return _descend(placed, size) if placed is not None else None


def _slice_layers(tree: NetworkTree, gang: GangRequest) -> list[tuple[int, int]] | None:
    """Kueue's slices as (tier, size), outer first: one layer, or its multi-layer slices (each policy inside
    the one before, each level below the one before); None for subgroups Kueue does not write."""
    layers: list[tuple[int, int]] = []
    for i, policy in enumerate(gang.sub_groups):
        if policy.parent != (gang.sub_groups[i - 1].name if i else "") or policy.network is None:
            return None
        tier = limit_of(tree, policy.network, f"subGroupPolicy[{policy.name}].networkTopology")[1]
        if policy.sub_group_size < 1 or (layers and not tier < layers[-1][0]):
            return None
        layers.append((tier, policy.sub_group_size))
    return layers


def balanced_plan(
    tree: NetworkTree,
    gang: GangRequest,
    shapes: Sequence[Shape],
    per_node: Mapping[bytes, Sequence[int]],
    fits: Mapping[tuple[bytes, str], tuple[NodeFit, ...]],
) -> Plan | None:
    """The gang laid out by Kueue's balanced placement, or None where Kueue does not use it (no preferred
    level, a required or unconstrained one, running members, members of several shapes) or it finds no
    balanced layout (Kueue then takes its best fit: the gang's own walk)."""
    network = gang.network
    if not gang.balanced or network is None or network.mode is not TopologyMode.SOFT or not network.highest_tier_name:
        return None
    if len(shapes) != 1 or len(shapes[0].members) != len(gang.pods):
        return None
    layers = _slice_layers(tree, gang)
    if layers is None:
        return None
    (slice_tier, size), *inner = layers or [(NODE_TIER, 1)]
    shape = shapes[0]
    request = BalanceRequest(
        preferred_tier=limit_of(tree, network, "network")[1],
        slice_tier=slice_tier,
        size=size,
        members=len(shape.members),
        slots=per_node[shape.key],
        inner=tuple(inner),
    )
    counts = balanced_counts(tree, request)
    if counts is None:
        return None
    members = iter(shape.members)  # rank order: consecutive ranks on one node, then one domain
    assignments: list[tuple[str, str, int]] = []
    score = 0.0
    for node in tree.nodes:
        for nth in range(counts.get(node, 0)):
            assignments.append((next(members).uid, node, nth))
            score += fits[(shape.key, node)][nth].score.score
    return Plan(
        hypernode=tree.lca(counts),
        assignments=tuple(assignments),
        score=round(score, 6),
        free_after=sum(request.slots) - request.members,
        placed=request.members,
    )
