"""kube-scheduler's per-node scores for pods no device vendor claims: NodeResourcesFit (its scoring
strategy), NodeResourcesBalancedAllocation and ImageLocality, each 0..100 times kube's default weight (1).

These need no normalisation over the feasible nodes (kube has none for them), so each node's points are
its own and the walk's ceiling grows by their most. A pod a device vendor claims is scored by its device
or fragmentation policy alone: these scores do not apply to it (see docs/engine.md, "Scores"). A node
that does not report `allocatable` gets no resource points (as it is not checked for resources).
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


class NodeScores:
    """One pod's NodeResourcesFit, BalancedAllocation and ImageLocality scores, asked node by node."""

    __slots__ = ("_images", "balanced", "ceiling", "images", "index", "nonzero", "requests", "strategy")

    def __init__(
        self,
        requests: Mapping[str, int],
        images: Sequence[str],
        strategy: ScoringStrategy,
        index: ClusterIndex | None,
    ) -> None:
        """`requests`: the pod's effective request in milli-units; `index`: the cluster (ImageLocality's
        spread over its nodes; None: no image scores)."""
        self.requests = requests
        self.nonzero = nonzero_request(requests)
        self.strategy = strategy
        self.balanced = not best_effort(requests)
        self.images = tuple(images) if index is not None else ()
        self.index = index
        self._images: ImageLocality | None = None
        most = NODE_RESOURCES_FIT_WEIGHT + BALANCED_ALLOCATION_WEIGHT * self.balanced
        most += IMAGE_LOCALITY_WEIGHT * bool(self.images)
        self.ceiling = float(MAX_NODE_SCORE * most)

    def points(self, facts: NodeFacts) -> float:
        """The node's weighted points: up to `ceiling`."""
        total = 0
        allocatable = facts.allocatable
        if allocatable is not None:
            nonzero = facts.nonzero_requested if facts.nonzero_requested is not None else facts.requested
            total += NODE_RESOURCES_FIT_WEIGHT * fit_score(
                self.strategy, self.nonzero, allocatable, facts.requested, nonzero
            )
            if self.balanced:
                total += BALANCED_ALLOCATION_WEIGHT * balanced_score(self.requests, allocatable, facts.requested)
        if self.images and facts.image_sizes:
            total += IMAGE_LOCALITY_WEIGHT * self._image_locality().score(facts.image_sizes)
        return float(total)

    def _image_locality(self) -> ImageLocality:
        """Counted once per pod, over every node of the cluster (kube's spread factor)."""
        if self._images is None:
            assert self.index is not None  # images are kept only with an index
            nodes = list(self.index.nodes())
            counts = nodes_holding(self.images, (n.images for n in nodes if n.images))
            self._images = ImageLocality(self.images, counts, len(nodes))
        return self._images
