"""What makes two nodes the same to the engine: everything but their name and the pods' uids.

Two nodes with equal keys get the same per-node answer (devices, scores,
reasons) for the same request; only the node name in it differs, and the loop
puts that back. Vendors therefore never read `node.name` or an allocation's
`pod_uid` (see the contract in vendor.py). The keys are small integers from
bounded interners of one engine's memo (memo.py): cheap to hash, exact by construction.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.memo import IdentityCache, Interner, Memo
from engine.core.model import NodeState
from schemas.topology import Device, Link

# NodeState / Allocation fields the key covers, by kind; a test fails when either struct grows a field.
KEYED_NODE_FIELDS = (
    "machine_type", "devices", "links", "labels", "annotations", "ready", "unschedulable", "allocations",
)  # fmt: skip
# The name, and what the node rules read (decide/node_rules.py): no vendor reads them.
UNKEYED_NODE_FIELDS = (
    "name",
    "taints",
    "allocatable",
    "requested",
    "pods",
    "host_ports",
    "running",
    "nonzero_requested",
    "images",
    "csi_volume_limits",
    "csi_volumes",
)
KEYED_ALLOCATION_FIELDS = ("index", "memory_mib", "cores", "qos", "app_class")
UNKEYED_ALLOCATION_FIELDS = ("pod_uid",)

TOPOLOGY_BOUND = 4_096  # distinct device / link tuples remembered
NODE_BOUND = 32_768  # distinct node states remembered (a few snapshots of a 10,000-node cluster)


class NodeKeys:
    """One engine's node keys: interners of device tuples, link tuples and node states."""

    def __init__(self, memo: Memo) -> None:
        self._devices: Interner[tuple[Device, ...]] = memo.interner(TOPOLOGY_BOUND)
        self._links: Interner[tuple[Link, ...]] = memo.interner(TOPOLOGY_BOUND)
        # Snapshots share their link tuples between nodes and decisions: identity finds them without hashing
        # (a device tuple hashes about as fast as an identity lookup, so it is interned by value only).
        self._links_seen: IdentityCache[tuple[Link, ...], int] = memo.identity(TOPOLOGY_BOUND)
        self._states: Interner[tuple[object, ...]] = memo.interner(NODE_BOUND)
        self._nodes_seen: IdentityCache[NodeState, int] = memo.identity(NODE_BOUND)
        self._wiring: Interner[tuple[tuple[int, str, int, int | None], ...]] = memo.interner(TOPOLOGY_BOUND)
        self._wiring_seen: IdentityCache[tuple[Device, ...], int] = memo.identity(4 * TOPOLOGY_BOUND)

    def _links_id(self, links: tuple[Link, ...]) -> int:
        found = self._links_seen.get(links)
        if found is None:
            found = self._links.id_of(links)
            self._links_seen.put(links, found)
        return found

    def topology_key(self, node: NodeState) -> tuple[int, int]:
        """Equal for two nodes exactly when their devices and links are equal."""
        return (self._devices.id_of(node.devices), self._links_id(node.links))

    def wiring_key(self, node: NodeState) -> tuple[int, int]:
        """Equal for two nodes whose devices are wired alike: indices, vendors, NVSwitch links, NUMA nodes
        (they break ties between NVLink pairs printed without a PCIe path) and links.

        What pair scores depend on, and nothing else: UUIDs, models, memory and health do not change
        how two devices are connected, so nodes that differ only there share their pair tables."""
        found = self._wiring_seen.get(node.devices)
        if found is None:
            found = self._wiring.id_of(
                tuple((d.index, d.vendor.value, d.nvswitch_links, d.numa_node) for d in node.devices)
            )
            self._wiring_seen.put(node.devices, found)
        return (found, self._links_id(node.links))

    def node_key(self, node: NodeState) -> int:
        """Equal for two nodes exactly when everything but the name and the pods' uids is equal."""
        return self.node_keys((node,))[0]

    def node_keys(self, nodes: Sequence[NodeState]) -> list[int]:
        """`node_key` of each node, in one pass."""
        keys: list[int] = []
        for node, found in zip(nodes, self._nodes_seen.get_many(nodes), strict=True):
            if found is None:
                found = self._states.id_of(self._state(node))
                self._nodes_seen.put(node, found)
            keys.append(found)
        return keys

    def _state(self, node: NodeState) -> tuple[object, ...]:
        return (
            self._devices.id_of(node.devices),
            self._links_id(node.links),
            node.machine_type,
            tuple(node.labels.items()),  # insertion order kept: equal dicts in another order only miss
            tuple(node.annotations.items()),
            node.ready,
            node.unschedulable,
            tuple((a.index, a.memory_mib, a.cores, a.qos, a.app_class) for a in node.allocations),
        )

    def sizes(self) -> dict[str, int]:
        """Entries per table (for the bound tests)."""
        return {
            "devices": len(self._devices),
            "links": len(self._links),
            "links_seen": len(self._links_seen),
            "states": len(self._states),
            "nodes_seen": len(self._nodes_seen),
        }
