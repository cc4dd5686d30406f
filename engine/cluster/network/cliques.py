"""Multi-node NVLink domains: nodes sharing the `nvidia.com/gpu.clique` label value.

A clique is the closest grouping there is, so it becomes a hypernode one tier
below the lowest tier of the tree (tier 0 under Volcano's tier-1 ToRs; tier 1
when there is no other tree), named "nvlink:<label value>" (a ':' appears in
no Kubernetes name or label value). A gang limited to a tier still fits in a
clique below it. A clique whose nodes sit under different parent hypernodes
contradicts the tree: it is reported and not made a domain.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.cluster.network.index import VIRTUAL_TOP, Draft
from engine.core.hypernodes import TreeProblem

PREFIX = "nvlink:"
SHOWN = 4


def add_cliques(draft: Draft, clique_label: str, labels: Mapping[str, Mapping[str, str]]) -> list[TreeProblem]:
    """Insert one hypernode per consistent clique into the draft; the problems of the others."""
    members: dict[str, list[str]] = {}
    for node in sorted(draft.nodes):
        value = labels[node].get(clique_label, "")
        if value:
            members.setdefault(value, []).append(node)
    tier = min(draft.tier.values()) - 1 if draft.tier else 1
    problems: list[TreeProblem] = []
    for value, nodes in sorted(members.items()):
        parents = {node: draft.node_parent.get(node, VIRTUAL_TOP) for node in nodes}
        distinct = sorted(set(parents.values()))
        if len(distinct) > 1:
            where = ", ".join(f"{n} under {parents[n]}" for n in nodes[:SHOWN])
            more = f" and {len(nodes) - SHOWN} more" if len(nodes) > SHOWN else ""
            reason = f"its nodes sit under {len(distinct)} hypernodes ({where}{more}); not made an NVLink domain"
            field = f"metadata.labels[{clique_label}]"
            problems.append(TreeProblem(object=f"clique/{value}", field=field, reason=reason))
            continue
        name = PREFIX + value
        draft.tier[name] = tier
        if distinct[0] != VIRTUAL_TOP:
            draft.hypernode_parent[name] = distinct[0]
        for node in nodes:
            draft.node_parent[node] = name
    return problems
