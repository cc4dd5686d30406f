"""The network tree from Kueue / KAI label levels, and NVLink cliques below any tree."""

from __future__ import annotations

from network_builders import hn, node, plain, sub, volcano_example

from engine.cluster.network import VIRTUAL_TOP, build_tree

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
CLIQUE = "nvidia.com/gpu.clique"


def kueue_example() -> dict[str, dict[str, str]]:
    """Kueue's documented data centre: rack-1 appears in block-1 and in block-2."""
    rows = [("node-1", "block-1", "rack-1"), ("node-2", "block-1", "rack-2")]
    rows += [("node-3", "block-2", "rack-1"), ("node-4", "block-2", "rack-3")]
    return {name: {BLOCK: block, RACK: rack, HOST: name} for name, block, rack in rows}


def test_kueue_example_keeps_equal_rack_values_of_different_blocks_apart() -> None:
    built = build_tree([], kueue_example(), topology_levels=[BLOCK, RACK, HOST])
    tree = built.tree
    assert built.problems == ()
    assert tree.hypernodes_at(1) == ("block-1/rack-1", "block-1/rack-2", "block-2/rack-1", "block-2/rack-3")
    assert tree.hypernodes_at(2) == ("block-1", "block-2")
    assert tree.hypernodes_at(3) == (VIRTUAL_TOP,)
    assert tree.leaf_of("node-3") == "block-2/rack-1"
    assert tree.lca(["node-1", "node-3"]) == VIRTUAL_TOP
    assert tree.lca(["node-1", "node-2"]) == "block-1"
    assert tree.tier_named(RACK) == 1
    assert tree.tier_named(BLOCK) == 2
    assert tree.tier_name_of("block-2") == BLOCK


def test_levels_without_hostname_make_the_last_level_tier_1() -> None:
    tree = build_tree([], kueue_example(), topology_levels=[BLOCK]).tree
    assert tree.hypernodes_at(1) == ("block-1", "block-2")
    assert tree.nodes_under("block-2") == ("node-3", "node-4")


def test_a_node_missing_a_level_label_is_left_out_like_kueue() -> None:
    nodes = kueue_example()
    del nodes["node-4"][RACK]
    built = build_tree([], nodes, topology_levels=[BLOCK, RACK, HOST])
    assert built.tree.excluded == ("node-4",)
    assert "node-4" not in built.tree.nodes
    assert [(p.object, p.field) for p in built.problems] == [("node/node-4", f"metadata.labels[{RACK}]")]
    assert built.tree.hypernodes_at(1) == ("block-1/rack-1", "block-1/rack-2", "block-2/rack-1")


def test_hostname_not_last_and_repeated_levels_are_reported() -> None:
    built = build_tree([], kueue_example(), topology_levels=[HOST, BLOCK, BLOCK])
    assert [p.field for p in built.problems] == ["spec.levels[0].nodeLabel", "spec.levels[2].nodeLabel"]
    assert built.tree.hypernodes_at(1) == ("block-1", "block-2")


def test_hypernodes_take_precedence_over_levels() -> None:
    built = build_tree([hn("s0", 1, node("node-1"))], kueue_example(), topology_levels=[BLOCK])
    assert built.tree.hypernodes_at(1) == ("s0",)
    assert [p.object for p in built.problems] == ["topology/levels"]


def _with_cliques(nodes: dict[str, dict[str, str]], cliques: dict[str, str]) -> dict[str, dict[str, str]]:
    return {name: {**labels, **({CLIQUE: cliques[name]} if name in cliques else {})} for name, labels in nodes.items()}


def test_a_clique_is_a_domain_one_tier_below_the_lowest() -> None:
    nodes = _with_cliques(plain(*(f"node{i}" for i in range(8))), {"node0": "c.1", "node1": "c.1", "node2": "c.2"})
    built = build_tree(volcano_example(), nodes)
    tree = built.tree
    assert built.problems == ()
    assert tree.hypernodes_at(0) == ("nvlink:c.1", "nvlink:c.2")
    assert tree.ancestors("node0") == ("nvlink:c.1", "s0", "s4", "s6", VIRTUAL_TOP)
    assert tree.parent("nvlink:c.2") == "s1"
    assert tree.lca(["node0", "node1"]) == "nvlink:c.1"
    assert tree.ancestor_at_tier("node1", 0) == "nvlink:c.1"  # a hard limit of tier 1 or 0 still admits it
    assert tree.ancestor_at_tier("node1", 1) == "s0"
    assert tree.leaf_of("node3") == "s1"


def test_a_clique_across_two_leaves_is_reported_and_not_a_domain() -> None:
    nodes = _with_cliques(plain(*(f"node{i}" for i in range(8))), {"node1": "c.9", "node2": "c.9"})
    built = build_tree(volcano_example(), nodes)
    assert [(p.object, p.field) for p in built.problems] == [("clique/c.9", f"metadata.labels[{CLIQUE}]")]
    assert "node1 under s0, node2 under s1" in built.problems[0].reason
    assert built.tree.hypernodes_at(0) == ()
    assert built.tree.leaf_of("node1") == "s0"


def test_cliques_alone_are_tier_1_under_the_top() -> None:
    nodes = _with_cliques(plain("a", "b", "c"), {"a": "x", "b": "x"})
    tree = build_tree([], nodes).tree
    assert tree.tiers == (1, 2)
    assert tree.hypernodes_at(1) == ("nvlink:x",)
    assert tree.parent("c") == VIRTUAL_TOP
    assert tree.lca(["a", "b"]) == "nvlink:x"


def test_cliques_under_label_levels_are_tier_0() -> None:
    nodes = _with_cliques(kueue_example(), {"node-3": "k", "node-4": "k", "node-1": "j"})
    built = build_tree([], nodes, topology_levels=[BLOCK, RACK, HOST])
    assert built.tree.hypernodes_at(0) == ("nvlink:j",)  # node-3 and node-4 sit in different racks
    assert [p.object for p in built.problems] == ["clique/k"]
    no_cliques = build_tree([], nodes, topology_levels=[BLOCK, RACK, HOST], clique_label="")
    assert no_cliques.tree.hypernodes_at(0) == ()


def test_no_source_puts_every_node_under_the_top() -> None:
    tree = build_tree([], plain("b", "a")).tree
    assert tree.tiers == (1,)
    assert tree.nodes == ("a", "b")
    assert tree.ancestors("a") == (VIRTUAL_TOP,)


def test_mixed_depths_keep_tiers_rising() -> None:
    # A ToR straight under a tier-3 spine: tier 2 is skipped on that branch.
    hns = [hn("tor", 1, node("a")), hn("spine", 3, sub("tor"), node("b"))]
    tree = build_tree(hns, plain("a", "b")).tree
    assert tree.ancestor_at_tier("a", 2) == "tor"
    assert tree.ancestor_at_tier("b", 2) is None
    assert tree.ancestor_at_tier("b", 3) == "spine"
