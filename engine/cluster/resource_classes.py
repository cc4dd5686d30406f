"""Nodes grouped by what kube-scheduler's resource scores read of them, and by their zone and region.

NodeResourcesFit and NodeResourcesBalancedAllocation score a node from its allocatable and requested
amounts alone, so nodes with equal amounts score alike for any one pod: a decision for a pod no device
vendor claims ranks these *resource classes* (engine/decide/kube/resource_walk.py) instead of scoring
every node. The zone and region labels are part of a class so that PodTopologySpread's and
InterPodAffinity's scores over those keys, which read only the node's domain (beside its own pods),
are one value per class. Ids are never reused: a class whose last node leaves is forgotten, and equal
amounts met again get a new id, logged (as every new class is) for the rankings to read.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Mapping, Sequence

from engine.core.model import NodeState

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
DOMAIN_LABELS = (ZONE, REGION)  # the well-known keys kube's default spread constraints and most pods use
RESOURCE_LOG_BOUND = 200_000  # classes logged before the log starts over (rankings then rebuild)

ResourceKey = tuple[object, ...]


def resource_key(node: NodeState) -> ResourceKey:
    """Equal for two nodes exactly when the resource scores and the domain labels cannot tell them apart."""
    return (
        None if node.allocatable is None else tuple(sorted(node.allocatable.items())),
        tuple(sorted(node.requested.items())),
        tuple(sorted(node.nonzero_requested.items())),
        tuple(node.labels.get(k) for k in DOMAIN_LABELS),
    )


class ResourceClasses:
    """Every node's resource class, each class's members sorted by name, and the log of new classes."""

    def __init__(self) -> None:
        self._ids: dict[ResourceKey, int] = {}  # live classes only
        self._keys: dict[int, ResourceKey] = {}
        self._class: dict[str, int] = {}
        self._members: dict[int, list[str]] = {}
        self._next_id = itertools.count(1)
        self.log: list[int] = []  # class ids in the order they were made
        self.log_epoch = 0

    def upsert(self, node: NodeState) -> None:
        name, key = node.name, resource_key(node)
        before = self._class.get(name)
        if before is not None:
            if self._keys[before] == key:
                return
            self._leave(before, name)
        class_id = self._ids.get(key)
        if class_id is None:
            class_id = self._ids[key] = next(self._next_id)
            self._keys[class_id] = key
            self._members[class_id] = []
            if len(self.log) >= RESOURCE_LOG_BOUND:
                self.log = []
                self.log_epoch += 1  # every ranking starts over from the live classes
            self.log.append(class_id)
        self._class[name] = class_id
        bisect.insort(self._members[class_id], name)

    def remove(self, name: str) -> None:
        class_id = self._class.pop(name, None)
        if class_id is not None:
            self._leave(class_id, name)

    def _leave(self, class_id: int, name: str) -> None:
        members = self._members[class_id]
        del members[bisect.bisect_left(members, name)]
        if not members:
            del self._members[class_id]
            del self._ids[self._keys.pop(class_id)]

    def __len__(self) -> int:
        return len(self._members)

    def live(self) -> Iterator[int]:
        return iter(self._members)

    def members(self, class_id: int) -> Sequence[str]:
        """The class's nodes, sorted by name (empty once no node has it)."""
        return self._members.get(class_id, ())

    def domain(self, class_id: int) -> Mapping[str, str]:
        """The class's values of DOMAIN_LABELS (those its nodes carry)."""
        values = self._keys[class_id][3]
        assert isinstance(values, tuple)
        return {k: v for k, v in zip(DOMAIN_LABELS, values, strict=True) if v is not None}
