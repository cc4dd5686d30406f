"""The nodes that pass a pod's node rules other than the pods around them, kept across decisions.

InterPodAffinity and PodTopologySpread normalise their scores over the feasible nodes: how many there
are (PodTopologySpread's hostname weight), which domains hold one, the lowest and highest score among
them. Asking every node on every decision is the per-node loop the cluster index exists to avoid, so
the nodes that pass everything else (ready, the device class's answer, taints, node affinity, ports,
resources) are kept per *base shape* (the pod's device request and the fields those rules read), with
their count per domain of the topology keys asked, and brought up to date from the index's node log:
only the nodes that changed since the last decision of the shape are asked again.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable

from engine.cluster.index import ClusterIndex
from engine.core.labels import Labels
from engine.core.model import NodeState

BASE_SHAPES_PER_INDEX = 32  # base shapes whose feasible nodes an index keeps

NodePasses = Callable[[NodeState], bool]  # the node passes the device answer and the base node rules


class BaseFeasible:
    """One base shape's passing nodes on one index, with their count per domain of the keys asked."""

    __slots__ = ("_by_domain", "epoch", "labels", "position")

    def __init__(self) -> None:
        self.labels: dict[str, Labels] = {}  # passing node -> its labels when counted
        self._by_domain: dict[str, dict[str, int]] = {}
        self.position = 0  # how much of the index's node log is read
        self.epoch = -1

    def sync(self, index: ClusterIndex, passes: NodePasses) -> None:
        if self.epoch != index.node_log_epoch:
            self.labels, self._by_domain = {}, {}
            self.epoch, self.position = index.node_log_epoch, 0
            for node in index.nodes():
                if passes(node):
                    self.labels[node.name] = node.labels
        else:
            for name in set(index.node_log[self.position :]):
                self._forget(name)
                now = index.get(name)
                if now is not None and passes(now):
                    self._count(name, now.labels)
        self.position = len(index.node_log)

    def _forget(self, name: str) -> None:
        labels = self.labels.pop(name, None)
        if labels is None:
            return
        for key, counts in self._by_domain.items():
            value = labels.get(key)
            if value is not None:
                counts[value] -= 1
                if not counts[value]:
                    del counts[value]

    def _count(self, name: str, labels: Labels) -> None:
        self.labels[name] = labels
        for key, counts in self._by_domain.items():
            value = labels.get(key)
            if value is not None:
                counts[value] = counts.get(value, 0) + 1

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, name: str) -> bool:
        return name in self.labels

    def by_domain(self, key: str) -> dict[str, int]:
        """Passing nodes per value of `key` (kept current once asked for)."""
        counts = self._by_domain.get(key)
        if counts is None:
            counts = self._by_domain[key] = {}
            for labels in self.labels.values():
                value = labels.get(key)
                if value is not None:
                    counts[value] = counts.get(value, 0) + 1
        return counts


class FeasibleTables:
    """One engine's base feasible sets, per index (they go with it) and base shape (most recent kept)."""

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[ClusterIndex, OrderedDict[bytes, BaseFeasible]] = (
            weakref.WeakKeyDictionary()
        )

    def of(self, index: ClusterIndex, shape: bytes, passes: NodePasses) -> BaseFeasible:
        tables = self._tables.get(index)
        if tables is None:
            tables = self._tables[index] = OrderedDict()
        found = tables.get(shape)
        if found is None:
            found = tables[shape] = BaseFeasible()
        tables.move_to_end(shape)
        while len(tables) > BASE_SHAPES_PER_INDEX:
            tables.popitem(last=False)
        found.sync(index, passes)
        return found

    def clear(self) -> None:
        self._tables.clear()
