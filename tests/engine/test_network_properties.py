"""Property tests on generated trees: the index agrees with a naive walk, and input order changes nothing."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st
from network_builders import hn, node, plain, sub

from engine.cluster.network import VIRTUAL_TOP, HyperNode, NetworkTree, aggregate_by_name, build_tree

Case = tuple[list[HyperNode], dict[str, dict[str, str]]]


@st.composite
def volcano_trees(draw: st.DrawFn) -> Case:
    """HyperNodes with tiers 1..4, each under some higher-tier one or none; nodes under some or none.

    A few nodes and hypernodes are named by a second parent as well, to exercise the one-parent rule.
    """
    count = draw(st.integers(0, 12))
    tiers = sorted((draw(st.integers(1, 4)) for _ in range(count)), reverse=True)
    names = [f"h{i}" for i in range(count)]
    members: dict[str, list[str]] = {name: [] for name in names}
    kinds: dict[str, list[str]] = {name: [] for name in names}
    for i, name in enumerate(names):
        higher = [names[j] for j in range(i) if tiers[j] > tiers[i]]
        for parent in draw(st.lists(st.sampled_from(higher), max_size=2, unique=True)) if higher else []:
            members[parent].append(name)
            kinds[parent].append("HyperNode")
    node_names = [f"n{i}" for i in range(draw(st.integers(1, 25)))]
    for n in node_names:
        for parent in draw(st.lists(st.sampled_from(names), max_size=2, unique=True)) if names else []:
            members[parent].append(n)
            kinds[parent].append("Node")
    hns = [
        hn(name, tier, *(node(m) if k == "Node" else sub(m) for m, k in zip(members[name], kinds[name], strict=True)))
        for name, tier in zip(names, tiers, strict=True)
    ]
    return draw(st.permutations(hns)), plain(*node_names)


def _naive_under(tree: NetworkTree) -> dict[str, set[str]]:
    under: dict[str, set[str]] = {h: set() for h in tree.hypernodes}
    for n in tree.nodes:
        for h in tree.ancestors(n):
            under[h].add(n)
    return under


def _check(tree: NetworkTree, values: Mapping[str, int]) -> None:
    assert sorted(tree.nodes) == sorted(set(tree.nodes))
    under = _naive_under(tree)
    sums = aggregate_by_name(tree, values)
    for h in tree.hypernodes:
        assert set(tree.nodes_under(h)) == under[h]
        assert sums[h] == sum(values.get(n, 0) for n in under[h])
        parent = tree.parent(h)
        if parent is not None:
            assert tree.tier_of(parent) > tree.tier_of(h)
            assert h in tree.children(parent)
    for tier in tree.tiers:
        assert all(tree.tier_of(h) == tier for h in tree.hypernodes_at(tier))
    for n in tree.nodes:
        chain = tree.ancestors(n)
        assert chain[-1] == VIRTUAL_TOP
        assert [tree.tier_of(h) for h in chain] == sorted(tree.tier_of(h) for h in chain)
        for tier in tree.tiers:
            within = [h for h in chain if tree.tier_of(h) <= tier]
            assert tree.ancestor_at_tier(n, tier) == (within[-1] if within else None)


@settings(max_examples=60, deadline=None)
@given(volcano_trees(), st.data())
def test_index_matches_a_naive_walk(case: Case, data: st.DataObject) -> None:
    hns, nodes = case
    tree = build_tree(hns, nodes).tree
    values = {n: data.draw(st.integers(0, 8)) for n in tree.nodes}
    _check(tree, values)
    group = data.draw(st.lists(st.sampled_from(tree.nodes), min_size=1, max_size=5))
    common = set.intersection(*(set(tree.ancestors(n)) for n in group))
    lowest = min(common, key=tree.tier_of)
    assert tree.lca(group) == lowest
    assert all(tree.contains(lowest, n) for n in group)


@settings(max_examples=40, deadline=None)
@given(volcano_trees())
def test_input_order_changes_nothing(case: Case) -> None:
    hns, nodes = case
    first = build_tree(hns, nodes)
    shuffled = list(reversed(hns))
    again = build_tree(shuffled, dict(reversed(list(nodes.items()))))
    assert first.problems == again.problems
    assert first.tree.hypernodes == again.tree.hypernodes
    assert first.tree.nodes == again.tree.nodes
    assert first.tree.hypernode_parent_ids == again.tree.hypernode_parent_ids
    assert first.tree.node_parent_ids == again.tree.node_parent_ids


LEVELS = ("block", "rack")


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"n{i}" for i in range(20)]),
        st.tuples(st.sampled_from(["b1", "b2", "b3"]), st.sampled_from(["r1", "r2"]), st.booleans()),
        min_size=1,
    )
)
def test_label_levels_group_nodes_by_label_prefix(rows: dict[str, tuple[str, str, bool]]) -> None:
    nodes = {n: {"block": b, "rack": r} if full else {"block": b} for n, (b, r, full) in rows.items()}
    built = build_tree([], nodes, topology_levels=LEVELS)
    tree = built.tree
    assert set(tree.excluded) == {n for n, (_, _, full) in rows.items() if not full}
    assert len(built.problems) == len(tree.excluded)
    _check(tree, {n: 1 for n in tree.nodes})
    for a in tree.nodes:
        for b in tree.nodes:
            same_block = nodes[a]["block"] == nodes[b]["block"]
            same_rack = same_block and nodes[a]["rack"] == nodes[b]["rack"]
            assert (tree.ancestor_at_tier(a, 2) == tree.ancestor_at_tier(b, 2)) == same_block
            assert (tree.ancestor_at_tier(a, 1) == tree.ancestor_at_tier(b, 1)) == same_rack


def test_cluster_sized_tree_aggregates_every_tier_to_the_total() -> None:
    from network_bench import TIER_SIZES, timed_build_and_aggregate

    from engine.cluster.network import aggregate

    tree, _, _ = timed_build_and_aggregate(repeats=1)
    assert len(tree.nodes) == 10_000
    assert len(tree.hypernodes) == sum(size for _, size in TIER_SIZES) + 1  # + the virtual top
    free = [i % 9 for i in range(len(tree.nodes))]
    sums = aggregate(tree, free)
    assert sums[tree.hypernode_index(VIRTUAL_TOP)] == sum(free)
    for tier, _ in TIER_SIZES:
        assert sum(sums[tree.hypernode_index(h)] for h in tree.hypernodes_at(tier)) == sum(free)
    leaf = tree.leaf_of("node-00042")
    start, end = tree.node_range(leaf)
    assert sums[tree.hypernode_index(leaf)] == sum(free[start:end])
