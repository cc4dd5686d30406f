"""The Node as discovery reads it, and what a vendor's discovery is."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from schemas.topology import NodeTopology


def source_prefix(node: str) -> str:
    """How every discovered topology's `source` starts: readers tell a Node object's word from an agent's by it."""
    return f"Node {node}: "


class DiscoveryError(ValueError):
    """A Node whose device plugin's resources or annotations cannot be read: names which and why."""


class NodeObject(msgspec.Struct, frozen=True, kw_only=True):
    """What discovery reads of a Node: its name, labels, annotations and `status.capacity`."""

    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    capacity: dict[str, str] = {}

    def count(self, resource: str) -> int:
        """A whole-number capacity (0 when absent); raises DiscoveryError for anything else."""
        text = self.capacity.get(resource, "0")
        try:
            value = int(text)
        except ValueError:
            raise DiscoveryError(f"node {self.name}: status.capacity[{resource}]: not a count: {text!r}") from None
        if value < 0:
            raise DiscoveryError(f"node {self.name}: status.capacity[{resource}]: negative: {value}")
        return value


class VendorDiscovery(msgspec.Struct, frozen=True, kw_only=True):
    """One vendor: whether a Node carries its device plugin, and its topology read from the Node."""

    name: str
    carries: Callable[[NodeObject], bool]
    read: Callable[[NodeObject], NodeTopology]
