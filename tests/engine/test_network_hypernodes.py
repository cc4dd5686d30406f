"""The network tree from Volcano HyperNodes: members, selectors, one parent each, tiers, tierNames."""

from __future__ import annotations

import msgspec
import pytest
from network_builders import hn, labelled, node, plain, regex, sub, volcano_example

from engine.cluster.network import VIRTUAL_TOP, build_tree, decode_hypernodes, from_event
from engine.core.hypernodes import HyperNodeList
from schemas.events import HyperNodeEvent, HyperNodeMember, MemberKind

NODES = plain(*(f"node{i}" for i in range(8)))


def test_volcano_example_tree() -> None:
    built = build_tree(volcano_example(), NODES)
    tree = built.tree
    assert built.problems == ()
    assert tree.tiers == (1, 2, 3, 4)
    assert tree.hypernodes_at(1) == ("s0", "s1", "s2", "s3")
    assert tree.hypernodes_at(3) == ("s6",)
    assert tree.hypernodes_at(4) == (VIRTUAL_TOP,)
    assert tree.hypernodes_at(9) == ()
    assert tree.ancestors("node2") == ("s1", "s4", "s6", VIRTUAL_TOP)
    assert tree.leaf_of("node7") == "s3"
    assert tree.parent("s0") == "s4"
    assert tree.parent("node0") == "s0"
    assert tree.parent(VIRTUAL_TOP) is None
    assert tree.nodes_under("s5") == ("node4", "node5", "node6", "node7")
    assert tree.lca(["node0", "node1"]) == "s0"
    assert tree.lca(["node1", "node3"]) == "s4"
    assert tree.lca_tier(["node0", "node7"]) == 3
    assert tree.ancestor_at_tier("node5", 2) == "s5"
    assert tree.ancestor_at_tier("node5", 0) is None
    assert tree.children("s6") == ("s4", "s5")


def test_nodes_outside_every_hypernode_sit_under_the_virtual_top() -> None:
    tree = build_tree(volcano_example(), {**NODES, **plain("spare")}).tree
    assert tree.parent("spare") == VIRTUAL_TOP
    assert tree.tier_of(VIRTUAL_TOP) == 4
    assert tree.lca(["spare", "node0"]) == VIRTUAL_TOP
    assert tree.nodes_under(VIRTUAL_TOP) == tuple(sorted([*NODES, "spare"]))


def test_regex_member_searches_node_names_like_go_matchstring() -> None:
    # Go's regexp.MatchString finds the pattern anywhere: "gpu" selects "a-gpu-1" too.
    nodes = plain("gpu-0", "gpu-1", "a-gpu-1", "cpu-0")
    tree = build_tree([hn("tor", 1, regex("gpu")), hn("anchored", 1, regex("^cpu-[0-9]+$"))], nodes).tree
    assert tree.nodes_under("tor") == ("a-gpu-1", "gpu-0", "gpu-1")
    assert tree.nodes_under("anchored") == ("cpu-0",)


def test_label_member_applies_match_labels_and_expressions() -> None:
    nodes = {
        "a": {"rack": "r1", "zone": "z1"},
        "b": {"rack": "r1"},
        "c": {"rack": "r2", "zone": "z1"},
        "d": {"zone": "z2"},
    }
    in_r1 = hn("r1", 1, labelled({"rack": "r1"}))
    zoned = hn("zoned", 1, labelled(expressions=[("zone", "Exists", []), ("rack", "NotIn", ["r1"])]))
    tree = build_tree([in_r1, zoned], nodes).tree
    assert tree.nodes_under("r1") == ("a", "b")
    assert tree.nodes_under("zoned") == ("c", "d")
    no_zone = build_tree([hn("h", 1, labelled(expressions=[("zone", "DoesNotExist", [])]))], nodes).tree
    assert no_zone.nodes_under("h") == ("b",)
    either = build_tree([hn("h", 1, labelled(expressions=[("rack", "In", ["r2", "r9"])]))], nodes).tree
    assert either.nodes_under("h") == ("c",)


def test_empty_label_match_selects_nothing_as_in_volcano() -> None:
    tree = build_tree([hn("h", 1, labelled())], {"a": {"x": "1"}}).tree
    assert tree.nodes_under("h") == ()


@pytest.mark.parametrize(
    ("member", "field", "words"),
    [
        (regex("("), "spec.members[0].selector.regexMatch.pattern", "does not compile"),
        (node("ghost"), "spec.members[0].selector.exactMatch.name", "no node 'ghost'"),
        (sub("ghost"), "spec.members[0].selector.exactMatch.name", "no HyperNode 'ghost'"),
        (regex("node", kind="HyperNode"), "spec.members[0].selector.regexMatch", "exactMatch only"),
        (
            labelled(expressions=[("rack", "Near", ["x"])]),
            "spec.members[0].selector.labelMatch.matchExpressions[0].operator",
            "unknown operator 'Near'",
        ),
        (
            labelled(expressions=[("rack", "In", [])]),
            "spec.members[0].selector.labelMatch.matchExpressions[0].values",
            "at least one value",
        ),
    ],
)
def test_a_member_that_cannot_apply_is_reported_and_skipped(member: object, field: str, words: str) -> None:
    built = build_tree([hn("bad", 2, member, node("node0"))], NODES)  # type: ignore[arg-type]
    assert [(p.object, p.field) for p in built.problems] == [("hypernode/bad", field)]
    assert words in built.problems[0].reason
    assert built.tree.nodes_under("bad") == ("node0",)  # the good member still applies


def test_a_selector_naming_no_or_two_rules_is_reported() -> None:
    raw = {"metadata": {"name": "h"}, "spec": {"tier": 1, "members": [{"type": "Node", "selector": {}}]}}
    built = build_tree(decode_hypernodes([raw]), NODES)
    assert built.problems[0].field == "spec.members[0].selector"
    assert "found none" in built.problems[0].reason


def test_a_node_with_two_parents_keeps_the_lowest_tier_then_name() -> None:
    hns = [hn("tor-b", 1, node("node0")), hn("tor-a", 1, node("node0")), hn("spine", 2, regex("node"))]
    built = build_tree(hns, plain("node0", "node1"))
    assert built.tree.parent("node0") == "tor-a"
    assert built.tree.parent("node1") == "spine"
    assert [(p.object, p.field) for p in built.problems] == [
        ("hypernode/spine", "spec.members[0]"),
        ("hypernode/tor-b", "spec.members[0]"),
    ]
    assert "node0 (kept under tor-a)" in built.problems[0].reason


def test_a_hypernode_with_two_parents_keeps_the_lowest_tier_then_name() -> None:
    hns = [hn("tor", 1, node("node0")), hn("agg", 2, sub("tor")), hn("core", 3, sub("tor"))]
    built = build_tree(hns, NODES)
    assert built.tree.parent("tor") == "agg"
    assert built.tree.parent("agg") == VIRTUAL_TOP
    assert [p.object for p in built.problems] == ["hypernode/core"]
    assert "tor (kept under agg)" in built.problems[0].reason


def test_a_member_not_below_its_parent_is_dropped_and_cycles_are_named() -> None:
    hns = [hn("a", 2, sub("b"), node("node0")), hn("b", 2, sub("a"), node("node1")), hn("self", 3, sub("self"))]
    built = build_tree(hns, NODES)
    reasons = {p.object: p.reason for p in built.problems}
    assert set(reasons) == {"hypernode/a", "hypernode/b", "hypernode/self"}
    assert all("closes a cycle" in r for r in reasons.values())
    assert built.tree.parent("a") == built.tree.parent("b") == VIRTUAL_TOP
    lower = build_tree([hn("low", 1, sub("high")), hn("high", 2, node("node0"))], NODES)
    assert "member high has tier 2, not lower than 1" in lower.problems[0].reason
    assert "cycle" not in lower.problems[0].reason


def test_a_duplicate_name_keeps_the_first() -> None:
    built = build_tree([hn("s0", 1, node("node0")), hn("s0", 1, node("node1"))], NODES)
    assert built.tree.nodes_under("s0") == ("node0",)
    assert built.problems[0].field == "metadata.name"


def test_tier_names_map_to_tiers_and_conflicts_are_reported() -> None:
    hns = [
        hn("s0", 1, node("node0"), tier_name="tor"),
        hn("s1", 1, node("node1"), tier_name="leaf"),
        hn("s4", 2, sub("s0"), sub("s1"), tier_name="spine"),
        hn("s5", 3, node("node2"), tier_name="tor"),
    ]
    built = build_tree(hns, NODES)
    assert built.tree.tier_named("leaf") == 1
    assert built.tree.tier_named("spine") == 2
    with pytest.raises(KeyError):
        built.tree.tier_named("tor")  # names tiers 1 and 3
    assert built.tree.tier_name_of("s0") == "tor"
    reasons = [p.reason for p in built.problems]
    assert any("'tor' names several tiers" in r for r in reasons)
    assert any("tier 1 has several names" in r for r in reasons)


def test_events_and_kubectl_json_give_the_same_tree() -> None:
    events = [
        HyperNodeEvent(name="s0", tier=1, members=(HyperNodeMember(kind=MemberKind.NODE, name="node0"),)),
        HyperNodeEvent(name="s1", tier=2, members=(HyperNodeMember(kind=MemberKind.HYPERNODE, name="s0"),)),
        HyperNodeEvent(name="gone", tier=1, members=(), deleted=True),
    ]
    from_events = build_tree(events, NODES).tree
    listed = msgspec.json.encode(HyperNodeList(items=tuple(from_event(e) for e in events[:2])))
    from_json = build_tree(decode_hypernodes(msgspec.json.decode(listed)), NODES).tree
    assert from_events.hypernodes == from_json.hypernodes == (VIRTUAL_TOP, "s1", "s0")
    assert from_events.ancestors("node0") == from_json.ancestors("node0") == ("s0", "s1", VIRTUAL_TOP)


def test_kubectl_field_names_are_decoded() -> None:
    raw = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": "s0", "uid": "x"},
                "spec": {
                    "tier": 1,
                    "tierName": "tor",
                    "members": [
                        {"type": "Node", "selector": {"regexMatch": {"pattern": "^node[01]$"}}},
                        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r7"}}}},
                    ],
                },
                "status": {"nodeCount": 2},
            }
        ],
    }
    nodes = {**NODES, "x": {"rack": "r7"}}
    tree = build_tree(decode_hypernodes(raw), nodes).tree
    assert tree.nodes_under("s0") == ("node0", "node1", "x")
    assert tree.tier_named("tor") == 1
    with pytest.raises(msgspec.ValidationError, match=r"hypernodes\[0\]"):
        decode_hypernodes([{"metadata": {"name": "s"}, "spec": {"tier": "one"}}])
