"""`topoplace topo tree` and the drawing behind it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from network_builders import hn, node, plain, regex, sub, volcano_example

from engine.cluster.network import build_tree
from engine.cluster.network.render import WIDTH, render_tree
from topoplace.cli import main

NODES = plain(*(f"node{i}" for i in range(8)))


def _fields(line: str) -> list[str]:
    return line.replace("│", " ").replace("├─", " ").replace("└─", " ").split()


def _row(text: str, label: str) -> list[str]:
    """The fields of the line drawn for `label` (tree characters removed)."""
    for line in text.splitlines():
        fields = _fields(line)
        if fields and fields[0] == label:
            return fields
    raise AssertionError(f"no line for {label!r} in\n{text}")


def test_each_hypernode_shows_tier_tier_name_and_summed_capacity() -> None:
    hns = [
        hn("s0", 1, node("node0"), node("node1"), tier_name="tor"),
        hn("s1", 2, sub("s0"), regex("node[2-7]"), tier_name="spine"),
        hn("bad", 1, regex("(")),
    ]
    built = build_tree(hns, NODES)
    free = {f"node{i}": i for i in range(8)}
    text = render_tree(built.tree, free, dict.fromkeys(NODES, 8), problems=built.problems)
    assert _row(text, "s0") == ["s0", "1", "tor", "1/16"]
    assert _row(text, "s1") == ["s1", "2", "spine", "28/64"]
    assert _row(text, "node3") == ["node3", "3/8"]
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "problems (1):\n- hypernode/bad: spec.members[0].selector.regexMatch.pattern" in text


def test_drawing_is_deterministic_and_can_leave_nodes_out() -> None:
    built = build_tree(volcano_example(), NODES)
    ones = dict.fromkeys(NODES, 1)
    text = render_tree(built.tree, ones, ones)
    assert text == render_tree(build_tree(list(reversed(volcano_example())), NODES).tree, ones, ones)
    order = [_fields(line)[0] for line in text.splitlines()[1:]]
    assert order.index("s4") < order.index("s0") < order.index("node0") < order.index("s1") < order.index("s5")
    short = render_tree(built.tree, ones, ones, show_nodes=False)
    assert "node0" not in short
    assert _row(short, "s5")[-1] == "4/4"


def test_long_names_are_clipped_to_80_columns() -> None:
    long_name = "x" * 120
    built = build_tree([hn(long_name, 1, node("node0"))], NODES)
    text = render_tree(built.tree, {}, {})
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "…" in text


def _snapshot(tmp_path: Path, body: dict[str, Any]) -> str:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(body))
    return str(path)


def _node(name: str, devices: int, held: list[int], labels: dict[str, str] | None = None, sick: int = -1) -> Any:
    return {
        "name": name,
        "labels": labels or {},
        "devices": [{"index": i, "healthy": i != sick} for i in range(devices)],
        "allocations": [{"index": i, "pod_uid": f"p{i}"} for i in held],
    }


def test_cli_draws_hypernodes_of_either_form_with_free_healthy_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hypernodes = [
        {"name": "tor-a", "tier": 1, "members": [{"kind": "node", "name": "a"}, {"kind": "node", "name": "b"}]},
        {
            "metadata": {"name": "spine"},
            "spec": {
                "tier": 2,
                "tierName": "spine",
                "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "tor-a"}}}],
            },
        },
    ]
    nodes = [_node("a", 8, [0, 1]), _node("b", 4, [], sick=3), _node("c", 2, [0])]
    path = _snapshot(tmp_path, {"snapshot": {"nodes": nodes, "hypernodes": hypernodes}, "request": {"uid": "x"}})
    assert main(["topo", "tree", "--snapshot", path]) == 0
    out = capsys.readouterr().out
    assert _row(out, "tor-a") == ["tor-a", "1", "9/12"]  # a: 6 free of 8; b: 3 healthy, free, of 4
    assert _row(out, "spine") == ["spine", "2", "spine", "9/12"]
    assert _row(out, "(top)") == ["(top)", "3", "10/14"]
    assert _row(out, "c") == ["c", "1/2"]


def test_cli_builds_from_topology_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = "kubernetes.io/hostname"
    nodes = [
        _node(n, 2, held, {host: n, **extra})
        for n, held, extra in [("a", [], {"rack": "r1"}), ("b", [1], {"rack": "r1"}), ("c", [], {})]
    ]
    path = _snapshot(tmp_path, {"nodes": nodes, "topology_levels": ["rack", "kubernetes.io/hostname"]})
    assert main(["topo", "tree", "--snapshot", path, "--hypernodes-only"]) == 0
    out = capsys.readouterr().out
    assert _row(out, "r1") == ["r1", "1", "rack", "3/4"]
    assert "outside the tree: c" in out
    assert "node/c: metadata.labels[rack]" in out


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"nodes": [{"labels": {}}]}), "name"),
        (json.dumps({"nodes": [], "hypernodes": [{"name": "h", "tier": "x", "members": []}]}), "hypernodes[0]"),
    ],
)
def test_cli_names_what_is_wrong_with_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["topo", "tree", "--snapshot", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("topoplace topo tree: ")
    assert words in err


def test_cli_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "tree", "--snapshot", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
