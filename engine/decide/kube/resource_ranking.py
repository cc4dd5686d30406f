"""One pod shape's resource classes, best NodeResourcesFit + BalancedAllocation points first, kept current.

A class's points depend on its amounts (engine/cluster/resource_classes.py) and the pod's request
alone, and class ids are never reused, so a class is scored once per request shape: a ranking reads
only the classes made since it last looked (the index's resource class log) and forgets the classes
no node has any more when a walk meets them, or when they grow many.
"""

from __future__ import annotations

import bisect
import weakref
from collections import OrderedDict
from collections.abc import Callable

from engine.cluster.index import ClusterIndex
from engine.cluster.resource_classes import ResourceClasses

RESOURCE_RANKINGS_PER_INDEX = 32  # request shapes whose ranking an index keeps
DEAD_CLASSES_BOUND = 4_096  # classes without nodes a ranking keeps beyond twice the live ones


class ResourceRanking:
    """(-points, class id), ascending: the best points first, ties by class id (the walk orders names)."""

    __slots__ = ("epoch", "position", "ranked")

    def __init__(self) -> None:
        self.ranked: list[tuple[int, int]] = []
        self.position = 0  # how much of the classes' log is read
        self.epoch = -1

    def sync(self, classes: ResourceClasses, points_of: Callable[[int], int]) -> None:
        if self.epoch != classes.log_epoch:
            self.ranked = sorted((-points_of(c), c) for c in classes.live())
            self.epoch = classes.log_epoch
        else:
            for class_id in classes.log[self.position :]:
                if classes.members(class_id):
                    bisect.insort(self.ranked, (-points_of(class_id), class_id))
            if len(self.ranked) > 2 * len(classes) + DEAD_CLASSES_BOUND:
                self.ranked = [entry for entry in self.ranked if classes.members(entry[1])]
        self.position = len(classes.log)

    def forget(self, at: int) -> None:
        del self.ranked[at]


class ResourceRankings:
    """One engine's rankings, per index (they go with it) and request shape (most recent kept)."""

    def __init__(self) -> None:
        self._rankings: weakref.WeakKeyDictionary[ClusterIndex, OrderedDict[bytes, ResourceRanking]] = (
            weakref.WeakKeyDictionary()
        )

    def of(self, index: ClusterIndex, shape: bytes, points_of: Callable[[int], int]) -> ResourceRanking:
        """The shape's ranking over `index`, brought up to date (`points_of`: a class's points)."""
        rankings = self._rankings.get(index)
        if rankings is None:
            rankings = self._rankings[index] = OrderedDict()
        ranking = rankings.get(shape)
        if ranking is None:
            ranking = rankings[shape] = ResourceRanking()
        rankings.move_to_end(shape)
        while len(rankings) > RESOURCE_RANKINGS_PER_INDEX:
            rankings.popitem(last=False)
        ranking.sync(index.resources, points_of)
        return ranking

    def clear(self) -> None:
        self._rankings.clear()
