"""`build_tree`: the network tree of a snapshot, from HyperNodes or node-label levels, plus NVLink cliques.

Sources, in order: Volcano HyperNodes when any are given (topology levels
are then ignored, with a problem); else the label levels of a Kueue / KAI
Topology; else no tree. NVLink cliques are added below either. Every node of
the tree that no hypernode holds sits directly under the virtual top, one
tier above the highest. Problems never raise: they are returned with the tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from engine.cluster.network.cliques import add_cliques
from engine.cluster.network.from_hypernodes import hypernode_draft
from engine.cluster.network.from_labels import label_draft
from engine.cluster.network.index import Draft, NetworkTree
from engine.core.hypernodes import HyperNode, TreeProblem, as_hypernodes
from schemas.events import HyperNodeEvent

CLIQUE_LABEL = "nvidia.com/gpu.clique"


class BuiltTree(msgspec.Struct, frozen=True, kw_only=True):
    tree: NetworkTree
    problems: tuple[TreeProblem, ...] = ()


def build_tree(
    hypernodes: Iterable[HyperNode | HyperNodeEvent],
    nodes: Mapping[str, Mapping[str, str]],
    *,
    topology_levels: Sequence[str] = (),
    clique_label: str = CLIQUE_LABEL,
) -> BuiltTree:
    """The tree over `nodes` (node name -> labels) and what in the input it could not honour."""
    objects = as_hypernodes(list(hypernodes))
    problems: list[TreeProblem] = []
    tier_names: dict[str, int] = {}
    if objects:
        draft, tier_names, problems = hypernode_draft(objects, nodes)
        if topology_levels:
            reason = "ignored: HyperNodes are given and take precedence"
            problems.append(TreeProblem(object="topology/levels", field="spec.levels", reason=reason))
    elif topology_levels:
        draft, tier_names, problems = label_draft(topology_levels, nodes)
    else:
        draft = Draft(nodes=sorted(nodes))
    if clique_label:
        problems.extend(add_cliques(draft, clique_label, nodes))
    return BuiltTree(tree=NetworkTree(draft, tier_names), problems=tuple(problems))
