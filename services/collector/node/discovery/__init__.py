"""Devices of a node from what its device plugin publishes on the Node object, as HAMi reads them.

A vendor whose device plugin advertises its devices (resources in `status.capacity`, a device
list in an annotation) needs no agent of ours on the node: its topology is read from the Node, and the cluster
watcher publishes it (services/collector/cluster/node_devices.py, the one module of the watcher
that may import this package).
One module per vendor, one line per vendor in VENDORS below; `discover` asks each in turn.
NVIDIA is read by NVML on the node (services.collector.node.nvml_source), not here.
"""

from __future__ import annotations

from schemas.topology import NodeTopology
from services.collector.node.discovery import metax, neuron
from services.collector.node.discovery.node import DiscoveryError, NodeObject, VendorDiscovery, source_prefix

VENDORS: tuple[VendorDiscovery, ...] = (
    neuron.DISCOVERY,
    metax.DISCOVERY,
)


def discover(node: NodeObject) -> NodeTopology | None:
    """The node's topology from the first vendor whose device plugin it carries; None: no such vendor.

    Its `source` starts with `source_prefix(node.name)`.

    Raises DiscoveryError naming the resource or annotation that cannot be read."""
    for vendor in VENDORS:
        if vendor.carries(node):
            return vendor.read(node)
    return None


__all__ = ["VENDORS", "DiscoveryError", "NodeObject", "VendorDiscovery", "discover", "source_prefix"]
