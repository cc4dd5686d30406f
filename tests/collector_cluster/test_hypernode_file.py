"""HyperNodes from a YAML / JSON file."""

from __future__ import annotations

import json

import pytest
from cluster_objects import hypernode_json

from services.collector.cluster.hypernode_file import HyperNodeFileError, parse_hypernodes


def test_multi_document_yaml_lists_and_json() -> None:
    yaml_text = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: tor-1}
spec:
  tier: 1
  members:
  - type: Node
    selector: {exactMatch: {name: n1}}
---
kind: List
items:
- metadata: {name: spine}
  spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: tor-1}}}]}
"""
    assert [h.metadata.name for h in parse_hypernodes(yaml_text)] == ["tor-1", "spine"]
    as_json = json.dumps([hypernode_json("a", 1, [("Node", "n")]), hypernode_json("b", 2, [("HyperNode", "a")])])
    parsed = parse_hypernodes(as_json)
    assert [(h.metadata.name, h.spec.tier) for h in parsed] == [("a", 1), ("b", 2)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata: {name: x}\nspec: {members: []}", "document 0: Object missing required field `tier` - at `$.spec`"),
        ("metadata: {name: x}\nspec: {tier: one}", "Expected `int`, got `str` - at `$.spec.tier`"),
        ("kind: Node\nmetadata: {name: x}", "kind 'Node' is not HyperNode"),
        ("spec: {tier: 1}", "metadata.name is required"),
        ("[{metadata: {name: x}, spec: {tier: 1}}, {metadata: {name: x}, spec: {tier: 2}}]", "'x' is defined twice"),
        ("a: [", "not YAML or JSON"),
    ],
)
def test_bad_files_name_the_document_and_field(text: str, message: str) -> None:
    with pytest.raises(HyperNodeFileError) as err:
        parse_hypernodes(text, source="hn.yaml")
    assert message in str(err.value) and str(err.value).startswith("hn.yaml: ")
