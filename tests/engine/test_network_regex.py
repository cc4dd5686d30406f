"""HyperNode regexMatch patterns as Volcano evaluates them: RE2, searched anywhere in the node name.

A backtracking engine takes seconds on a nested repetition that RE2 matches in linear time; the
placer builds its tree on the event loop, so such a pattern stalled every decision.
"""

from __future__ import annotations

import pytest
from network_builders import hn, node, plain, regex

from engine.cluster.network import build_tree, selectors

# Valid RE2 (Volcano accepts it); exponential for a backtracking engine on a long name that fails late.
CATASTROPHIC = r"^(\w+-?)+-h100-\d+$"


@pytest.mark.timeout(10)
def test_a_nested_repetition_on_long_names_is_decided_not_stalled() -> None:
    failing = "a" * 37 + "!"  # 38 characters: a backtracking search tries every split of the a's
    matching = "rack-7-node-h100-12"
    nodes = plain(failing, "b" * 60 + "-h100-x", matching, *(f"{'c' * 30}-{i}" for i in range(50)))
    built = build_tree([hn("h100s", 1, regex(CATASTROPHIC))], nodes)
    assert built.problems == ()
    assert built.tree.nodes_under("h100s") == (matching,)


@pytest.mark.parametrize(
    ("pattern", "selected"),
    [
        ("h100", ["gpu-h100-1", "h100-0", "x-h100"]),  # unanchored: anywhere in the name
        ("^h100", ["h100-0"]),
        ("h100$", ["x-h100"]),
        (r"^gpu-h100-\d+$", ["gpu-h100-1"]),
        (r"^[a-z]+-\w+-[0-9]$", ["gpu-h100-1"]),
        ("(?i)^GPU-", ["gpu-h100-1"]),  # RE2 flags as Go reads them
        (r"\bh100\b", ["gpu-h100-1", "h100-0", "x-h100"]),  # ASCII word boundaries: '-' is not a word character
        (r"\Ah100-\d\z", ["h100-0"]),  # RE2's \A and \z (Python's re spells \z as \Z)
        ("^(gpu|x)-", ["gpu-h100-1", "x-h100"]),
    ],
)
def test_patterns_select_as_go_regexp_matchstring(pattern: str, selected: list[str]) -> None:
    nodes = plain("gpu-h100-1", "h100-0", "x-h100", "cpu-0")
    built = build_tree([hn("h", 1, regex(pattern))], nodes)
    assert built.problems == ()
    assert list(built.tree.nodes_under("h")) == selected


def test_dollar_is_the_end_of_the_name_not_before_a_final_newline() -> None:
    # Go (and RE2): `$` without (?m) matches at the end of the text only; Python's re also before a last "\n".
    assert selectors.compile_node_pattern("^a$").search("a\n") is None


@pytest.mark.parametrize("pattern", [r"(a)\1", "^(?=gpu)", "gpu(?!-0)", "(?<!x)h100", "["])
def test_a_pattern_re2_refuses_is_reported_naming_the_field_and_the_rest_still_works(pattern: str) -> None:
    nodes = plain("gpu-0", "gpu-1", "node0")
    built = build_tree([hn("bad", 1, regex(pattern)), hn("good", 1, node("node0"), regex("^gpu-1$"))], nodes)
    assert [(p.object, p.field) for p in built.problems] == [
        ("hypernode/bad", "spec.members[0].selector.regexMatch.pattern")
    ]
    assert "does not compile as RE2" in built.problems[0].reason
    assert built.tree.nodes_under("good") == ("gpu-1", "node0")
    assert built.tree.nodes_under("bad") == ()


def test_the_compile_error_carries_re2s_words() -> None:
    with pytest.raises(selectors.SelectorError) as raised:
        selectors.compile_node_pattern(r"(a)\1")
    assert raised.value.field == "selector.regexMatch.pattern"
    assert r"\1" in raised.value.reason
