"""The tree from Volcano HyperNodes: resolve members, keep one parent per node and hypernode.

Rules (each breach is a TreeProblem; nothing is guessed silently):
* two HyperNodes with one name: the first given is kept;
* a member that cannot be applied (bad selector, unknown node or hypernode) is skipped;
* a HyperNode member must have a lower tier than its parent, else the edge is
  dropped (this also breaks every cycle, since tiers fall along kept edges);
* a node or hypernode selected by several parents keeps the closest one: the
  parent of lowest tier, then the first by name; the other edges are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.cluster.network.index import Draft
from engine.cluster.network.selectors import SelectorError, hypernode_member_name, select_nodes
from engine.core.hypernodes import HyperNode, TreeProblem

Edge = tuple[str, str]  # (parent hypernode, member field)

MORE_SHOWN = 3


def _problem(hypernode: str, field: str, reason: str) -> TreeProblem:
    return TreeProblem(object=f"hypernode/{hypernode}", field=field, reason=reason)


def _unique(hypernodes: Sequence[HyperNode], problems: list[TreeProblem]) -> dict[str, HyperNode]:
    kept: dict[str, HyperNode] = {}
    for hn in hypernodes:
        if hn.name in kept:
            problems.append(_problem(hn.name, "metadata.name", "another HyperNode has this name; the first is kept"))
        else:
            kept[hn.name] = hn
    return dict(sorted(kept.items()))


def _hypernode_members(hn: HyperNode) -> list[str]:
    out: list[str] = []
    for member in hn.spec.members:
        if member.type == "HyperNode":
            try:
                out.append(hypernode_member_name(member))
            except SelectorError:
                continue
    return out


def _reaches(by_name: Mapping[str, HyperNode], start: str, target: str) -> bool:
    """Whether `target` is `start` or below it by HyperNode members (edges as written, before any rule)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name == target:
            return True
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        todo.extend(_hypernode_members(by_name[name]))
    return False


def _member_edges(
    by_name: Mapping[str, HyperNode],
    node_names: Sequence[str],
    labels: Mapping[str, Mapping[str, str]],
    problems: list[TreeProblem],
) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
    """Candidate parents of every node and hypernode, from the members of every HyperNode."""
    node_edges: dict[str, list[Edge]] = {}
    hn_edges: dict[str, list[Edge]] = {}
    for name, hn in by_name.items():
        for i, member in enumerate(hn.spec.members):
            field = f"spec.members[{i}]"
            try:
                if member.type == "Node":
                    for node in select_nodes(member, node_names, labels):
                        edges = node_edges.setdefault(node, [])
                        if all(parent != name for parent, _ in edges):  # overlapping members of one parent
                            edges.append((name, field))
                    continue
                child = hypernode_member_name(member)
            except SelectorError as exc:
                problems.append(_problem(name, f"{field}.{exc.field}", exc.reason))
                continue
            if child not in by_name:
                problems.append(_problem(name, f"{field}.selector.exactMatch.name", f"no HyperNode {child!r}"))
                continue
            child_tier, tier = by_name[child].spec.tier, hn.spec.tier
            if child_tier >= tier:
                cycle = "; it closes a cycle" if _reaches(by_name, child, name) else ""
                reason = f"member {child} has tier {child_tier}, not lower than {tier}{cycle}; the edge is dropped"
                problems.append(_problem(name, field, reason))
                continue
            edges = hn_edges.setdefault(child, [])
            if all(parent != name for parent, _ in edges):
                edges.append((name, field))
    return node_edges, hn_edges


def _closest(
    edges: Mapping[str, list[Edge]], tier: Mapping[str, int], what: str, problems: list[TreeProblem]
) -> dict[str, str]:
    """One parent per child: the lowest tier, then the first name; the dropped edges are reported."""
    kept: dict[str, str] = {}
    dropped: dict[Edge, list[str]] = {}
    for child, candidates in sorted(edges.items()):
        ordered = sorted(candidates, key=lambda edge: (tier[edge[0]], edge[0]))
        kept[child] = ordered[0][0]
        for edge in ordered[1:]:
            dropped.setdefault(edge, []).append(child)
    for (parent, field), children in sorted(dropped.items()):
        shown = ", ".join(f"{c} (kept under {kept[c]})" for c in children[:MORE_SHOWN])
        more = f" and {len(children) - MORE_SHOWN} more" if len(children) > MORE_SHOWN else ""
        reason = f"{what} with another parent: {shown}{more}; one parent each, the lowest tier then name wins"
        problems.append(_problem(parent, field, reason))
    return kept


def _tier_names(by_name: Mapping[str, HyperNode], problems: list[TreeProblem]) -> dict[str, int]:
    """tierName -> tier; a name given to several tiers is reported and not used."""
    tiers_of: dict[str, dict[int, str]] = {}  # name -> tier -> first hypernode carrying it
    names_of: dict[int, dict[str, str]] = {}
    for name, hn in by_name.items():
        if hn.spec.tier_name:
            tiers_of.setdefault(hn.spec.tier_name, {}).setdefault(hn.spec.tier, name)
            names_of.setdefault(hn.spec.tier, {}).setdefault(hn.spec.tier_name, name)
    out: dict[str, int] = {}
    for tier_name, tiers in sorted(tiers_of.items()):
        if len(tiers) == 1:
            out[tier_name] = next(iter(tiers))
            continue
        carriers = ", ".join(f"tier {t} ({hn})" for t, hn in sorted(tiers.items()))
        first = tiers[sorted(tiers)[1]]
        problems.append(_problem(first, "spec.tierName", f"{tier_name!r} names several tiers: {carriers}; not used"))
    for tier, names in sorted(names_of.items()):
        if len(names) > 1:
            carriers = ", ".join(f"{n!r} ({hn})" for n, hn in sorted(names.items()))
            first = names[sorted(names)[1]]
            problems.append(_problem(first, "spec.tierName", f"tier {tier} has several names: {carriers}"))
    return out


def hypernode_draft(
    hypernodes: Sequence[HyperNode], labels: Mapping[str, Mapping[str, str]]
) -> tuple[Draft, dict[str, int], list[TreeProblem]]:
    """The draft tree, the tierName map and the problems, from HyperNodes over the given nodes."""
    problems: list[TreeProblem] = []
    by_name = _unique(hypernodes, problems)
    node_names = sorted(labels)
    node_edges, hn_edges = _member_edges(by_name, node_names, labels, problems)
    tier = {name: hn.spec.tier for name, hn in by_name.items()}
    draft = Draft(
        tier=tier,
        tier_name={name: hn.spec.tier_name for name, hn in by_name.items() if hn.spec.tier_name},
        hypernode_parent=_closest(hn_edges, tier, "member", problems),
        node_parent=_closest(node_edges, tier, "selects nodes", problems),
        nodes=node_names,
    )
    return draft, _tier_names(by_name, problems), problems
