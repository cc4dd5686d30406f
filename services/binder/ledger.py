"""The binder's device ledger: which pod holds which share of which device, per node.

Pure and synchronous. Rebuilt on start from `pods.lifecycle` (bound pods with
their devices; deleted pods free theirs) and `topology.nodes` (device
capacity), then kept current by the binder's own binds. Before a binding the
binder asks `collisions()`: the last guard against handing a device out twice,
even when the placer's view was stale.

Share rules (the annotation format's meaning, schemas.annotations):
- `memory_mib == 0` means the whole device's memory, so such a holder leaves
  no memory for anyone else; a whole device (all memory, all cores) therefore
  needs an idle device.
- Shares must fit: the memory of all holders <= the device's memory, and their
  cores <= the device's cores (percent for GPUs). A share of cores 0 (memory
  only, HAMi's gpucores 0) takes no cores but needs one left free.
- While a node's topology has not been seen, memory cannot be summed: only
  "all memory" holders are checked against others, and cores against 100.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from schemas.events import (
    DeviceAssignment,
    Event,
    LifecyclePhase,
    NodeTopologyEvent,
    PodLifecycleEvent,
)
from schemas.topics import PODS_LIFECYCLE, TOPOLOGY_NODES
from schemas.topology import Device

# A GPU's compute share is a percentage; used when a node's topology is unknown.
DEFAULT_DEVICE_CORES = 100


class DeviceCapacity(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    memory_mib: int
    cores: int = DEFAULT_DEVICE_CORES


class Holding(msgspec.Struct, frozen=True, kw_only=True):
    """The devices one pod holds on one node."""

    pod_uid: str
    node: str
    devices: tuple[DeviceAssignment, ...]


def capacities_of(devices: Iterable[Device]) -> dict[int, DeviceCapacity]:
    return {d.index: DeviceCapacity(index=d.index, memory_mib=d.memory_mib, cores=d.cores) for d in devices}


class DeviceLedger:
    def __init__(self) -> None:
        self._capacity: dict[str, dict[int, DeviceCapacity]] = {}
        self._holdings: dict[str, Holding] = {}  # by pod uid
        # node -> device index -> pod uid -> share; derived from _holdings for fast checks
        self._shares: dict[str, dict[int, dict[str, DeviceAssignment]]] = {}

    # --- capacity (topology.nodes) ------------------------------------------------------

    def set_node_devices(self, node: str, devices: Iterable[Device]) -> None:
        self._capacity[node] = capacities_of(devices)

    def forget_node(self, node: str) -> None:
        self._capacity.pop(node, None)

    def knows_node(self, node: str) -> bool:
        return node in self._capacity

    # --- holdings -----------------------------------------------------------------------

    def holding(self, pod_uid: str) -> Holding | None:
        return self._holdings.get(pod_uid)

    def holders(self, node: str, index: int) -> dict[str, DeviceAssignment]:
        return dict(self._shares.get(node, {}).get(index, {}))

    def hold(self, holding: Holding) -> Holding | None:
        """Record a pod's devices (replacing what it held before); returns the previous holding."""
        previous = self.release(holding.pod_uid)
        self._holdings[holding.pod_uid] = holding
        node_shares = self._shares.setdefault(holding.node, {})
        for share in holding.devices:
            node_shares.setdefault(share.index, {})[holding.pod_uid] = share
        return previous

    def release(self, pod_uid: str) -> Holding | None:
        holding = self._holdings.pop(pod_uid, None)
        if holding is None:
            return None
        node_shares = self._shares.get(holding.node, {})
        for share in holding.devices:
            holders = node_shares.get(share.index)
            if holders is not None:
                holders.pop(pod_uid, None)
                if not holders:
                    del node_shares[share.index]
        if not node_shares:
            self._shares.pop(holding.node, None)
        return holding

    def restore(self, pod_uid: str, previous: Holding | None) -> None:
        """Undo a `hold` whose binding did not happen."""
        self.release(pod_uid)
        if previous is not None:
            self.hold(previous)

    def pod_count(self) -> int:
        return len(self._holdings)

    # --- events from the topics ---------------------------------------------------------

    def apply_message(self, topic: str, key: str | None, event: Event | None) -> None:
        """One message from `pods.lifecycle` or `topology.nodes`; a tombstone (None) forgets its key."""
        if topic == PODS_LIFECYCLE.name:
            if isinstance(event, PodLifecycleEvent):
                self.apply_lifecycle(event)
            elif event is None and key:
                self.release(key)
        elif topic == TOPOLOGY_NODES.name:
            if isinstance(event, NodeTopologyEvent):
                self.apply_topology(event)
            elif event is None and key:
                self.forget_node(key)

    def apply_lifecycle(self, event: PodLifecycleEvent) -> None:
        if event.phase is LifecyclePhase.DELETED or not event.node:
            self.release(event.uid)
        else:
            self.hold(Holding(pod_uid=event.uid, node=event.node, devices=event.devices))

    def apply_topology(self, event: NodeTopologyEvent) -> None:
        self.set_node_devices(event.node, event.devices)

    # --- the check before a binding -----------------------------------------------------

    def collisions(self, pod_uid: str, node: str, devices: Iterable[DeviceAssignment]) -> tuple[str, ...]:
        """Why these devices cannot go to this pod, one reason per device; empty when they fit.

        The pod's own shares are left out: a re-delivered placement for a pod that
        already holds exactly these devices is not a collision.
        """
        reasons: list[str] = []
        seen: set[int] = set()
        capacity = self._capacity.get(node)
        for share in devices:
            if share.index in seen:
                reasons.append(f"device {share.index} on node {node} is listed twice in the placement")
                continue
            seen.add(share.index)
            if capacity is not None and share.index not in capacity:
                reasons.append(f"node {node} has no device {share.index}")
                continue
            others = {uid: s for uid, s in self._shares.get(node, {}).get(share.index, {}).items() if uid != pod_uid}
            reason = _device_collision(node, share, None if capacity is None else capacity[share.index], others)
            if reason:
                reasons.append(reason)
        return tuple(reasons)


def _describe_holders(others: Mapping[str, DeviceAssignment]) -> str:
    return ", ".join(sorted(others))


def _device_collision(
    node: str,
    share: DeviceAssignment,
    capacity: DeviceCapacity | None,
    others: Mapping[str, DeviceAssignment],
) -> str | None:
    if not others:
        return None
    where = f"device {share.index} on node {node}"
    held_by = f"held by pod {_describe_holders(others)}"
    takes_all_memory = share.memory_mib == 0 or any(o.memory_mib == 0 for o in others.values())
    if capacity is None:
        if takes_all_memory:
            return f"{where} is {held_by}; a share of all its memory needs it idle"
    else:
        used = sum(_memory_of(o, capacity) for o in others.values())
        wanted = _memory_of(share, capacity)
        if used + wanted > capacity.memory_mib:
            free = max(capacity.memory_mib - used, 0)
            return (
                f"{where} has {free} MiB free of {capacity.memory_mib} MiB, "
                f"the placement asks for {wanted} MiB ({held_by})"
            )
    total_cores = DEFAULT_DEVICE_CORES if capacity is None else capacity.cores
    used_cores = sum(min(o.cores, total_cores) for o in others.values())
    wanted_cores = min(share.cores, total_cores)
    # A memory-only share (cores 0) still runs on the device: it needs a core left, as the engine asks.
    if used_cores + wanted_cores > total_cores or (wanted_cores == 0 and used_cores >= total_cores):
        free_cores = max(total_cores - used_cores, 0)
        return (
            f"{where} has {free_cores} of {total_cores} cores free, the placement asks for {wanted_cores} ({held_by})"
        )
    return None


def _memory_of(share: DeviceAssignment, capacity: DeviceCapacity) -> int:
    return capacity.memory_mib if share.memory_mib == 0 else share.memory_mib
