"""The network tree as arrays: built once per snapshot, read on every gang decision.

Hypernodes get integer ids in depth-first pre-order (the virtual top is 0);
nodes are laid out in the same depth-first order, so the nodes under any
hypernode are one contiguous slice `[start, end)` of `NetworkTree.nodes`.
Summing a per-node value up the tree is one prefix sum (`aggregate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate

import msgspec

VIRTUAL_TOP = "(top)"  # parentheses appear in no Kubernetes name nor label value


class Draft(msgspec.Struct, kw_only=True):
    """The tree before indexing: tiers and parent edges by name (absent parent = the virtual top)."""

    tier: dict[str, int] = {}  # hypernode -> tier
    tier_name: dict[str, str] = {}  # hypernode -> its tierName ("" = none)
    hypernode_parent: dict[str, str] = {}
    node_parent: dict[str, str] = {}
    nodes: list[str] = []  # every node in the tree
    excluded: list[str] = []  # nodes left out of the tree


class NetworkTree:
    """Hypernodes (tier, parent) over nodes; every tree node has exactly one parent hypernode.

    Tiers grow strictly from a node's leaf hypernode up to the virtual top.
    Names not in the tree raise KeyError.
    """

    def __init__(self, draft: Draft, tier_names: Mapping[str, int]) -> None:
        top_tier = max(draft.tier.values(), default=0) + 1
        tiers = {**draft.tier, VIRTUAL_TOP: top_tier}
        child_hns: dict[str, list[str]] = {name: [] for name in tiers}
        direct: dict[str, list[str]] = {name: [] for name in tiers}
        for name in sorted(draft.tier):
            child_hns[draft.hypernode_parent.get(name, VIRTUAL_TOP)].append(name)
        for node in sorted(draft.nodes):
            direct[draft.node_parent.get(node, VIRTUAL_TOP)].append(node)
        hypernodes: list[str] = []
        nodes: list[str] = []
        start: dict[str, int] = {}
        end: dict[str, int] = {}
        stack: list[tuple[str, bool]] = [(VIRTUAL_TOP, False)]
        while stack:  # iterative depth-first walk: direct nodes first, then child hypernodes by name
            name, leaving = stack.pop()
            if leaving:
                end[name] = len(nodes)
                continue
            if name in start:  # met again: a cycle, which would walk on without end
                raise ValueError(f"network tree: hypernode {name} lies under itself (a parent edge cycle)")
            hypernodes.append(name)
            start[name] = len(nodes)
            nodes.extend(direct[name])
            stack.append((name, True))
            stack.extend((child, False) for child in reversed(child_hns[name]))
        if len(hypernodes) != len(tiers):
            raise ValueError("network tree: hypernode parent edges form a cycle")  # the builders never do
        self.virtual_top = VIRTUAL_TOP
        self.nodes: tuple[str, ...] = tuple(nodes)
        self.hypernodes: tuple[str, ...] = tuple(hypernodes)
        self.excluded: tuple[str, ...] = tuple(sorted(draft.excluded))
        self.tier_names: Mapping[str, int] = dict(sorted(tier_names.items()))
        self._hn_id = {name: i for i, name in enumerate(hypernodes)}
        self._node_id = {name: i for i, name in enumerate(nodes)}
        self.hypernode_tiers: tuple[int, ...] = tuple(tiers[name] for name in hypernodes)
        self.hypernode_parent_ids: tuple[int, ...] = tuple(
            -1 if name == VIRTUAL_TOP else self._hn_id[draft.hypernode_parent.get(name, VIRTUAL_TOP)]
            for name in hypernodes
        )
        self.node_parent_ids: tuple[int, ...] = tuple(
            self._hn_id[draft.node_parent.get(node, VIRTUAL_TOP)] for node in nodes
        )
        self.starts: tuple[int, ...] = tuple(start[name] for name in hypernodes)
        self.ends: tuple[int, ...] = tuple(end[name] for name in hypernodes)
        self._tier_name_of = {name: draft.tier_name.get(name, "") for name in hypernodes}
        self._children = {name: tuple(kids) for name, kids in child_hns.items()}
        self._direct = {name: tuple(kids) for name, kids in direct.items()}
        by_tier: dict[int, list[str]] = {}
        for name, tier in tiers.items():
            by_tier.setdefault(tier, []).append(name)
        self._at_tier = {tier: tuple(sorted(names)) for tier, names in sorted(by_tier.items())}
        self._ids_at_tier = {tier: tuple(self._hn_id[n] for n in names) for tier, names in self._at_tier.items()}
        self.tiers: tuple[int, ...] = tuple(self._at_tier)
        self._under: dict[str, tuple[str, ...]] = {}

    # --- lookups by name --------------------------------------------------------------------

    def node_index(self, node: str) -> int:
        return self._node_id[node]

    def hypernode_index(self, hypernode: str) -> int:
        return self._hn_id[hypernode]

    def is_node(self, name: str) -> bool:
        return name in self._node_id

    def is_hypernode(self, name: str) -> bool:
        return name in self._hn_id

    def hypernodes_at(self, tier: int) -> tuple[str, ...]:
        """The hypernodes of one tier, sorted by name (empty for a tier the tree lacks)."""
        return self._at_tier.get(tier, ())

    def hypernode_ids_at(self, tier: int) -> tuple[int, ...]:
        """Indices (into `hypernodes` and the aggregate) of the tier's hypernodes, in name order."""
        return self._ids_at_tier.get(tier, ())

    def tier_of(self, hypernode: str) -> int:
        return self.hypernode_tiers[self._hn_id[hypernode]]

    def tier_name_of(self, hypernode: str) -> str:
        return self._tier_name_of[hypernode]

    def tier_named(self, name: str) -> int:
        """The tier a tierName stands for (Volcano's highestTierName); KeyError if none."""
        return self.tier_names[name]

    def parent(self, name: str) -> str | None:
        """The parent hypernode of a node (looked up first) or of a hypernode; None for the top."""
        node = self._node_id.get(name)
        if node is not None:
            return self.hypernodes[self.node_parent_ids[node]]
        parent = self.hypernode_parent_ids[self._hn_id[name]]
        return None if parent < 0 else self.hypernodes[parent]

    def children(self, hypernode: str) -> tuple[str, ...]:
        """Child hypernodes, sorted by name."""
        return self._children[hypernode]

    def direct_nodes(self, hypernode: str) -> tuple[str, ...]:
        """Nodes whose parent is this hypernode, sorted by name."""
        return self._direct[hypernode]

    def leaf_of(self, node: str) -> str:
        """The lowest hypernode holding the node (its parent)."""
        return self.hypernodes[self.node_parent_ids[self._node_id[node]]]

    def ancestors(self, node: str) -> tuple[str, ...]:
        """The node's hypernodes, lowest first, ending with the virtual top."""
        out: list[str] = []
        hn = self.node_parent_ids[self._node_id[node]]
        while hn >= 0:
            out.append(self.hypernodes[hn])
            hn = self.hypernode_parent_ids[hn]
        return tuple(out)

    def ancestor_at_tier(self, node: str, tier: int) -> str | None:
        """The node's largest hypernode of tier <= `tier` (its domain under that limit); None if none.

        Tiers may skip values (a tier-1 ToR under a tier-3 spine): with tier=2
        that node's answer is its ToR.
        """
        found: str | None = None
        hn = self.node_parent_ids[self._node_id[node]]
        while hn >= 0 and self.hypernode_tiers[hn] <= tier:
            found = self.hypernodes[hn]
            hn = self.hypernode_parent_ids[hn]
        return found

    def node_range(self, hypernode: str) -> tuple[int, int]:
        """`[start, end)` of the hypernode's nodes in `nodes`."""
        i = self._hn_id[hypernode]
        return self.starts[i], self.ends[i]

    def contains(self, hypernode: str, node: str) -> bool:
        i = self._hn_id[hypernode]
        return self.starts[i] <= self._node_id[node] < self.ends[i]

    def nodes_under(self, hypernode: str) -> tuple[str, ...]:
        """Every node below the hypernode, sorted by name (cached)."""
        cached = self._under.get(hypernode)
        if cached is None:
            start, end = self.node_range(hypernode)
            cached = self._under[hypernode] = tuple(sorted(self.nodes[start:end]))
        return cached

    def lca(self, nodes: Iterable[str]) -> str:
        """The lowest hypernode holding every given node; ValueError for none."""
        ids = [self._node_id[n] for n in nodes]
        if not ids:
            raise ValueError("lca: no nodes given")
        lo, hi = min(ids), max(ids)
        hn = self.node_parent_ids[lo]
        while not (self.starts[hn] <= lo and hi < self.ends[hn]):
            hn = self.hypernode_parent_ids[hn]
        return self.hypernodes[hn]

    def lca_tier(self, nodes: Iterable[str]) -> int:
        return self.tier_of(self.lca(nodes))


def node_values(tree: NetworkTree, per_node: Mapping[str, int] | Sequence[int]) -> Sequence[int]:
    """Per-node values in tree node order: a mapping (missing nodes = 0) or a sequence already in order."""
    if isinstance(per_node, Mapping):
        get = per_node.get
        return [get(node, 0) for node in tree.nodes]
    if len(per_node) != len(tree.nodes):
        raise ValueError(f"per_node: {len(per_node)} values for {len(tree.nodes)} nodes in the tree")
    return per_node


def aggregate(tree: NetworkTree, per_node: Mapping[str, int] | Sequence[int]) -> tuple[int, ...]:
    """Per-hypernode sums of a per-node value, aligned with `tree.hypernodes`, in one pass."""
    prefix = [0, *accumulate(node_values(tree, per_node))]
    return tuple([prefix[e] - prefix[s] for s, e in zip(tree.starts, tree.ends, strict=True)])


def aggregate_by_name(tree: NetworkTree, per_node: Mapping[str, int] | Sequence[int]) -> dict[str, int]:
    return dict(zip(tree.hypernodes, aggregate(tree, per_node), strict=True))
