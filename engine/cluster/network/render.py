"""The network tree as text, for `topoplace topo tree`: one line per hypernode (and node), 80 columns.

Each line shows the tier, the tierName and a capacity the caller supplies
per node (e.g. free / total GPUs), summed up the tree. The order is the
tree's own (direct nodes by name, then child hypernodes by name), so the
same snapshot always prints the same text.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from engine.cluster.network.index import NetworkTree, aggregate, node_values
from engine.core.hypernodes import TreeProblem

WIDTH = 80
TIER_W = 4
TIER_NAME_W = 16
CAPACITY_W = 13
NAME_W = WIDTH - TIER_W - TIER_NAME_W - CAPACITY_W - 3


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _line(label: str, tier: str, tier_name: str, capacity: str) -> str:
    row = f"{_clip(label, NAME_W):<{NAME_W}} {tier:>{TIER_W}} {_clip(tier_name, TIER_NAME_W):<{TIER_NAME_W}} "
    return (row + f"{capacity:>{CAPACITY_W}}").rstrip()


def render_tree(
    tree: NetworkTree,
    free: Mapping[str, int] | Sequence[int],
    total: Mapping[str, int] | Sequence[int],
    *,
    show_nodes: bool = True,
    problems: Sequence[TreeProblem] = (),
    capacity_label: str = "free/total",
) -> str:
    """The tree drawn with box characters, then the nodes outside it and the problems."""
    free_by_node, total_by_node = node_values(tree, free), node_values(tree, total)
    free_sums, total_sums = aggregate(tree, free_by_node), aggregate(tree, total_by_node)
    lines = [_line("hypernode / node", "tier", "tier name", capacity_label)]

    def hypernode_line(name: str, prefix: str) -> str:
        i = tree.hypernode_index(name)
        capacity = f"{free_sums[i]}/{total_sums[i]}"
        return _line(prefix + name, str(tree.hypernode_tiers[i]), tree.tier_name_of(name), capacity)

    def node_line(name: str, prefix: str) -> str:
        i = tree.node_index(name)
        return _line(prefix + name, "", "", f"{free_by_node[i]}/{total_by_node[i]}")

    lines.append(hypernode_line(tree.virtual_top, ""))
    # (name, is hypernode, indent of its children, branch drawn before it)
    stack: list[tuple[str, bool, str, str]] = []

    def push_children(name: str, indent: str) -> None:
        kids = [(n, False) for n in tree.direct_nodes(name)] if show_nodes else []
        kids += [(h, True) for h in tree.children(name)]
        for k, (kid, is_hn) in reversed(list(enumerate(kids))):
            last = k == len(kids) - 1
            stack.append((kid, is_hn, indent + ("   " if last else "│  "), indent + ("└─ " if last else "├─ ")))

    push_children(tree.virtual_top, "")
    while stack:
        name, is_hn, indent, branch = stack.pop()
        if is_hn:
            lines.append(hypernode_line(name, branch))
            push_children(name, indent)
        else:
            lines.append(node_line(name, branch))
    if tree.excluded:
        lines += textwrap.wrap("outside the tree: " + ", ".join(tree.excluded), WIDTH, subsequent_indent="  ")
    if problems:
        lines.append(f"problems ({len(problems)}):")
        for problem in problems:
            lines += textwrap.wrap(str(problem), WIDTH, initial_indent="- ", subsequent_indent="  ")
    return "\n".join(lines) + "\n"
