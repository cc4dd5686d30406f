"""The tree from node labels: Kueue's (and KAI's) Topology `spec.levels[].nodeLabel`, top level first.

`kubernetes.io/hostname`, when given, must be the last level: it is the node
itself, not a hypernode. The level just above it is tier 1, the next tier 2,
and so on up. A hypernode is named by its label values from the top joined by
"/" (label values cannot hold "/"), so rack-1 of block-1 and rack-1 of block-2
are "block-1/rack-1" and "block-2/rack-1". Its tierName is the level's label key.

A node that lacks a level's label is left out of the tree and reported: Kueue
does the same (utiltas.NodeMatchesFlavor keeps only nodes carrying every level
label), so such a node takes no part in topology-aware placement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.cluster.network.index import Draft
from engine.core.hypernodes import TreeProblem

HOSTNAME = "kubernetes.io/hostname"


def _levels(levels: Sequence[str], problems: list[TreeProblem]) -> list[str]:
    out: list[str] = []
    for i, level in enumerate(levels):
        field = f"spec.levels[{i}].nodeLabel"
        if level in out:
            problems.append(TreeProblem(object="topology/levels", field=field, reason=f"{level} repeats; ignored"))
        elif level == HOSTNAME and i != len(levels) - 1:
            reason = f"{HOSTNAME} must be the last level; ignored"
            problems.append(TreeProblem(object="topology/levels", field=field, reason=reason))
        else:
            out.append(level)
    return out


def label_draft(
    levels: Sequence[str], labels: Mapping[str, Mapping[str, str]]
) -> tuple[Draft, dict[str, int], list[TreeProblem]]:
    """The draft tree, the tierName map (level label -> tier) and the problems."""
    problems: list[TreeProblem] = []
    required = _levels(levels, problems)
    domain_levels = required[:-1] if required and required[-1] == HOSTNAME else required
    top_tier = len(domain_levels)
    draft = Draft()
    for node in sorted(labels):
        node_labels = labels[node]
        missing = [level for level in required if level not in node_labels]
        if missing:
            draft.excluded.append(node)
            reason = "missing; like Kueue, the node is left out of the tree (no topology-aware placement)"
            problems.append(TreeProblem(object=f"node/{node}", field=f"metadata.labels[{missing[0]}]", reason=reason))
            continue
        draft.nodes.append(node)
        path = ""
        for depth, level in enumerate(domain_levels):
            parent = path
            path = f"{path}/{node_labels[level]}" if depth else node_labels[level]
            if path not in draft.tier:
                draft.tier[path] = top_tier - depth
                draft.tier_name[path] = level
                if depth:
                    draft.hypernode_parent[path] = parent
        if domain_levels:
            draft.node_parent[node] = path
    tier_names = {level: top_tier - depth for depth, level in enumerate(domain_levels)}
    return draft, tier_names, problems
