"""The network tree: Volcano HyperNodes, Kueue / KAI label levels and NVLink cliques as one indexed tree.

Pure and deterministic; see docs/engine.md, "The network tree".
"""

from engine.cluster.network.index import VIRTUAL_TOP, NetworkTree, aggregate, aggregate_by_name
from engine.cluster.network.tree import CLIQUE_LABEL, BuiltTree, build_tree
from engine.core.hypernodes import (
    HyperNode,
    HyperNodeList,
    TreeProblem,
    as_hypernodes,
    decode_hypernodes,
    from_event,
)

__all__ = [
    "CLIQUE_LABEL",
    "VIRTUAL_TOP",
    "BuiltTree",
    "HyperNode",
    "HyperNodeList",
    "NetworkTree",
    "TreeProblem",
    "aggregate",
    "aggregate_by_name",
    "as_hypernodes",
    "build_tree",
    "decode_hypernodes",
    "from_event",
]
