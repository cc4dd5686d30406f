"""kube-scheduler's per-node scores for pods no device vendor claims: NodeResourcesFit (its scoring
strategy), NodeResourcesBalancedAllocation and ImageLocality, each 0..100 times kube's default weight (1),
and NodeAffinity (weight 2) and TaintToleration (weight 3) normalised as kube normalises them.

The first three need no normalisation over the feasible nodes (kube has none for them), so each node's
points are its own and the walk's ceiling grows by their most. NodeAffinity (the weights of the preferred
terms a node matches, 100 * s / the feasible nodes' highest) and TaintToleration (untolerated
PreferNoSchedule taints, 100 - 100 * c / the highest) are normalised over the feasible nodes (`prepare`)
when the pod has preferred terms or some node such a taint; otherwise every node scores 0 and 100.
TaintToleration's points are counted less their constant 100 (so 3 * (score - 100), 0 for a node without
such taints): the order of the nodes is kube's, and a cluster without PreferNoSchedule taints keeps the
scores the other plugins give.

A pod a device vendor claims is scored by its device or fragmentation policy alone: these scores do not
apply to it (docs/engine.md, "Scores for pods without devices"). A node that does not report
`allocatable` gets no resource points (as it is not checked for resources).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.cluster.index import ClusterIndex
from engine.core.limits import ScoringStrategy
from engine.decide.kube.filters import NodeFacts
from engine.decide.kube.image_locality import ImageLocality, nodes_holding
from engine.decide.kube.resource_scores import (
    MAX_NODE_SCORE,
    balanced_score,
    best_effort,
    fit_score,
    nonzero_request,
)

NODE_RESOURCES_FIT_WEIGHT = 1  # kube-scheduler's default plugin weights
BALANCED_ALLOCATION_WEIGHT = 1
IMAGE_LOCALITY_WEIGHT = 1
NODE_AFFINITY_WEIGHT = 2
TAINT_TOLERATION_WEIGHT = 3


def normalized(raw: Mapping[str, int], reverse: bool) -> dict[str, int]:
    """kube's DefaultNormalizeScore: 100 * s / the highest (reverse: 100 minus that; all 0 -> 100)."""
    highest = max(raw.values(), default=0)
    if highest == 0:
        return dict.fromkeys(raw, MAX_NODE_SCORE if reverse else 0)
    scaled = {name: MAX_NODE_SCORE * s // highest for name, s in raw.items()}
    return {name: MAX_NODE_SCORE - s for name, s in scaled.items()} if reverse else scaled


class NodeScores:
    """One pod's NodeResourcesFit, BalancedAllocation and ImageLocality scores, asked node by node."""

    __slots__ = (
        "_images",
        "affinity_points",
        "balanced",
        "ceiling",
        "images",
        "index",
        "nonzero",
        "normalises",
        "requests",
        "strategy",
        "taint_points",
    )

    def __init__(
        self,
        requests: Mapping[str, int],
        images: Sequence[str],
        strategy: ScoringStrategy,
        index: ClusterIndex | None,
        *,
        preferred: bool = False,
        normalises: bool = False,
    ) -> None:
        """`requests`: the pod's effective request in milli-units; `index`: the cluster (ImageLocality's
        spread over its nodes; None: no image scores); `preferred`: the pod has preferred node-affinity
        terms; `normalises`: NodeAffinity and TaintToleration need `prepare` before `points`."""
        self.requests = requests
        self.nonzero = nonzero_request(requests)
        self.strategy = strategy
        self.balanced = not best_effort(requests)
        self.images = tuple(images) if index is not None else ()
        self.index = index
        self._images: ImageLocality | None = None
        self.normalises = normalises
        self.affinity_points: dict[str, int] = {}
        self.taint_points: dict[str, int] = {}
        most = NODE_RESOURCES_FIT_WEIGHT + BALANCED_ALLOCATION_WEIGHT * self.balanced
        most += IMAGE_LOCALITY_WEIGHT * bool(self.images) + NODE_AFFINITY_WEIGHT * preferred
        self.ceiling = float(MAX_NODE_SCORE * most)

    def prepare(self, affinity: Mapping[str, int], taints: Mapping[str, int]) -> None:
        """NodeAffinity's and TaintToleration's raw scores of the feasible nodes, normalised."""
        self.affinity_points = normalized(affinity, reverse=False)
        self.taint_points = normalized(taints, reverse=True)

    def points(self, facts: NodeFacts) -> float:
        """The node's weighted points: up to `ceiling`."""
        total = NODE_AFFINITY_WEIGHT * self.affinity_points.get(facts.name, 0)
        total += TAINT_TOLERATION_WEIGHT * (self.taint_points.get(facts.name, MAX_NODE_SCORE) - MAX_NODE_SCORE)
        total += self.resource_points(facts)
        if self.images and facts.image_sizes:
            total += IMAGE_LOCALITY_WEIGHT * self._image_locality().score(facts.image_sizes)
        return float(total)

    def resource_points(self, facts: NodeFacts) -> int:
        """NodeResourcesFit's and BalancedAllocation's weighted points: up to `resource_ceiling`, and read
        only from the node's allocatable, requested and non-zero requested amounts."""
        allocatable = facts.allocatable
        if allocatable is None:
            return 0
        nonzero = facts.nonzero_requested if facts.nonzero_requested is not None else facts.requested
        fit = fit_score(self.strategy, self.nonzero, allocatable, facts.requested, nonzero)
        total = NODE_RESOURCES_FIT_WEIGHT * fit
        if self.balanced:
            total += BALANCED_ALLOCATION_WEIGHT * balanced_score(self.requests, allocatable, facts.requested)
        return total

    @property
    def resource_ceiling(self) -> float:
        return float(MAX_NODE_SCORE * (NODE_RESOURCES_FIT_WEIGHT + BALANCED_ALLOCATION_WEIGHT * self.balanced))

    def _image_locality(self) -> ImageLocality:
        """Counted once per pod, over every node of the cluster (kube's spread factor)."""
        if self._images is None:
            assert self.index is not None  # images are kept only with an index
            nodes = list(self.index.nodes())
            counts = nodes_holding(self.images, (n.images for n in nodes if n.images))
            self._images = ImageLocality(self.images, counts, len(nodes))
        return self._images
