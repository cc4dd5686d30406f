"""The binder's device ledger: which pod holds which share of which device, per node.

Pure and synchronous. Fed by the API server's pods (the binder's own watch:
bound pods with the devices their seal proves, schemas/seal.py; a device
annotation without a valid seal counts for nothing), by `pods.lifecycle` and
`topology.nodes` (device capacity), and by the binder's own binds. Before a
binding the binder asks `collisions()`: the last guard against handing a
device out twice, even when the placer's view was stale.

Two rules keep a forged or edited report from freeing a device still in use:
- A pod's devices are freed when the API server says the pod is gone (or has
  finished). A `pods.lifecycle` "deleted" frees them only if `pod_gone` (the
  API watch's view) agrees; otherwise it is ignored and counted.
- The devices a pod was bound with are what it holds until it is gone: a
  later report of other devices for that bound pod on the same node (a user
  edited its `topoplace.io/devices` annotation) changes nothing, because the
  node gave the pod its devices when it started, not when the annotation changed.
- A pod's binding and the holds of its placements in flight are kept apart: each
  `hold` returns a ticket that settles only that hold (`mark_bound` makes it the
  binding, `restore` drops it), so one pod's single and gang placements in flight
  together never drop its binding, whatever order they end in. While a pod has
  several, each device counts with the largest of its shares.
- A `pods.lifecycle` "bound" counts only when the API watch has that pod bound
  on that node (`pod_bound_on`), and a binding only the topic reported ends
  when a completed list of pods does not have the pod (`forget_unlisted`): a
  forged "bound" for a pod that never existed holds nothing.

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

import enum
from collections.abc import Callable, Iterable, Mapping

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
from services.binder.device_collisions import DEFAULT_DEVICE_CORES as DEFAULT_DEVICE_CORES
from services.binder.device_collisions import DeviceCapacity as DeviceCapacity
from services.binder.device_collisions import device_collision as _device_collision
from services.binder.outcome import PodView


class LedgerNote(enum.Enum):
    """Why a report was not followed."""

    DELETE_REFUSED = "the API server still has the pod"
    EDIT_IGNORED = "the pod is bound with other devices, which stay held"
    BOUND_UNCONFIRMED = "the API watch does not have the pod bound on that node"


class Holding(msgspec.Struct, frozen=True, kw_only=True):
    """The devices one pod holds on one node."""

    pod_uid: str
    node: str
    devices: tuple[DeviceAssignment, ...]


class HoldTicket(msgspec.Struct, frozen=True, kw_only=True):
    """One hold in flight (a placement being bound): settled by `mark_bound` or `restore`, exactly it."""

    pod_uid: str
    number: int


def capacities_of(devices: Iterable[Device]) -> dict[int, DeviceCapacity]:
    return {
        d.index: DeviceCapacity(index=d.index, memory_mib=d.memory_mib, cores=d.cores, vendor=d.vendor, uuid=d.uuid)
        for d in devices
    }


def _always_gone(uid: str) -> bool:
    return True


def _always_bound(uid: str, node: str) -> bool:
    return True


class DeviceLedger:
    def __init__(
        self,
        *,
        pod_gone: Callable[[str], bool] = _always_gone,
        pod_bound_on: Callable[[str, str], bool] = _always_bound,
    ) -> None:
        """`pod_gone(uid)`: whether the API server agrees the pod is gone; `pod_bound_on(uid, node)`:
        whether it has the pod bound on that node (defaults: trust the topic)."""
        self._pod_gone = pod_gone
        self._pod_bound_on = pod_bound_on
        self._reported_only: set[str] = set()  # bindings only pods.lifecycle reported (not the watch, not us)
        self._capacity: dict[str, dict[int, DeviceCapacity]] = {}
        # A pod's binding and its holds in flight are kept apart: a hold settles only itself, so
        # placements of one pod in flight together (a single one and its gang's) never drop the
        # binding, whatever order they end in.
        self._bindings: dict[str, Holding] = {}  # by pod uid
        self._holds: dict[str, dict[int, Holding]] = {}  # pod uid -> ticket number -> hold in flight
        self._tickets = 0
        # node -> device index -> pod uid -> the pod's largest share there; derived, for fast checks
        self._shares: dict[str, dict[int, dict[str, DeviceAssignment]]] = {}

    # --- capacity (topology.nodes) ------------------------------------------------------

    def set_node_devices(self, node: str, devices: Iterable[Device]) -> None:
        self._capacity[node] = capacities_of(devices)

    def forget_node(self, node: str) -> None:
        self._capacity.pop(node, None)

    def knows_node(self, node: str) -> bool:
        return node in self._capacity

    def device_memory(self, node: str, index: int) -> int | None:
        """The device's MiB from the node's topology; None while it is not known."""
        capacity = self._capacity.get(node, {}).get(index)
        return None if capacity is None else capacity.memory_mib

    def device_uuids(self, node: str) -> dict[int, str] | None:
        """The node's device UUIDs by index from its topology; None while it is not known."""
        capacity = self._capacity.get(node)
        return None if capacity is None else {index: c.uuid for index, c in capacity.items()}

    def device_uuid(self, node: str, index: int) -> str | None:
        capacity = self._capacity.get(node, {}).get(index)
        return None if capacity is None or not capacity.uuid else capacity.uuid

    def device_capacity(self, node: str, index: int) -> DeviceCapacity | None:
        """The device as the node's topology has it; None while it is not known."""
        return self._capacity.get(node, {}).get(index)

    # --- holdings -----------------------------------------------------------------------

    def holding(self, pod_uid: str) -> Holding | None:
        """The pod's binding; while it has none, its latest hold in flight."""
        binding = self._bindings.get(pod_uid)
        if binding is not None:
            return binding
        holds = self._holds.get(pod_uid)
        return holds[max(holds)] if holds else None

    def holders(self, node: str, index: int) -> dict[str, DeviceAssignment]:
        return dict(self._shares.get(node, {}).get(index, {}))

    def hold(self, holding: Holding) -> HoldTicket:
        """Hold a pod's devices while its binding is in flight, beside what it holds already."""
        self._tickets += 1
        ticket = HoldTicket(pod_uid=holding.pod_uid, number=self._tickets)
        self._unindex(holding.pod_uid)
        self._holds.setdefault(holding.pod_uid, {})[ticket.number] = holding
        self._index(holding.pod_uid)
        return ticket

    def record_bound(self, holding: Holding) -> Holding | None:
        """A pod reported bound with these devices. Returns the holding kept instead when the pod was
        already bound on that node with other devices (those stay held: see the module's rules)."""
        current = self._bindings.get(holding.pod_uid)
        if current is not None and current.node == holding.node:
            return None if _same_devices(current.devices, holding.devices) else current
        self._unindex(holding.pod_uid)
        self._bindings[holding.pod_uid] = holding
        self._index(holding.pod_uid)
        self._reported_only.discard(holding.pod_uid)
        return None

    def mark_bound(self, ticket: HoldTicket) -> None:
        """The ticket's hold became the pod's binding (a pod already bound keeps its binding)."""
        holds = self._holds.get(ticket.pod_uid, {})
        held = holds.get(ticket.number)
        if held is None:
            return  # released meanwhile: the pod is gone
        self._unindex(ticket.pod_uid)
        del holds[ticket.number]
        if not holds:
            del self._holds[ticket.pod_uid]
        self._bindings.setdefault(ticket.pod_uid, held)
        self._index(ticket.pod_uid)
        self._reported_only.discard(ticket.pod_uid)

    def is_bound(self, pod_uid: str) -> bool:
        return pod_uid in self._bindings

    def bound_elsewhere(self, pod_uid: str, node: str, devices: tuple[DeviceAssignment, ...]) -> Holding | None:
        """The pod's binding when it is bound on another node or with other devices than these; else None."""
        current = self._bindings.get(pod_uid)
        if current is None:
            return None
        if current.node == node and _same_devices(current.devices, devices):
            return None
        return current

    def release(self, pod_uid: str) -> Holding | None:
        """The pod is gone: its binding and every hold of it end. Returns what `holding` said."""
        before = self.holding(pod_uid)
        self._unindex(pod_uid)
        self._bindings.pop(pod_uid, None)
        self._holds.pop(pod_uid, None)
        self._reported_only.discard(pod_uid)
        return before

    def forget_unlisted(self, listed: Callable[[str], bool]) -> list[str]:
        """After a completed list of pods: bindings only pods.lifecycle reported, of pods not listed, end."""
        unlisted = [uid for uid in self._reported_only if not listed(uid)]
        for uid in unlisted:
            self.release(uid)
        return unlisted

    def restore(self, ticket: HoldTicket) -> None:
        """Undo the ticket's `hold`, whose binding did not happen; the pod's binding and other holds stay."""
        holds = self._holds.get(ticket.pod_uid, {})
        if ticket.number not in holds:
            return
        self._unindex(ticket.pod_uid)
        del holds[ticket.number]
        if not holds:
            del self._holds[ticket.pod_uid]
        self._index(ticket.pod_uid)

    def _holdings_of(self, pod_uid: str) -> list[Holding]:
        binding = self._bindings.get(pod_uid)
        return ([binding] if binding is not None else []) + list(self._holds.get(pod_uid, {}).values())

    def _unindex(self, pod_uid: str) -> None:
        for holding in self._holdings_of(pod_uid):
            node_shares = self._shares.get(holding.node, {})
            for share in holding.devices:
                holders = node_shares.get(share.index)
                if holders is not None:
                    holders.pop(pod_uid, None)
                    if not holders:
                        del node_shares[share.index]
            if not node_shares:
                self._shares.pop(holding.node, None)

    def _index(self, pod_uid: str) -> None:
        """The pod's share of each device: the largest of its binding's and holds' (one of them wins)."""
        for holding in self._holdings_of(pod_uid):
            node_shares = self._shares.setdefault(holding.node, {})
            for share in holding.devices:
                holders = node_shares.setdefault(share.index, {})
                holders[pod_uid] = _larger(holders[pod_uid], share) if pod_uid in holders else share

    def pod_count(self) -> int:
        return len(self._bindings.keys() | self._holds.keys())

    # --- events from the topics ---------------------------------------------------------

    def apply_message(self, topic: str, key: str | None, event: Event | None) -> LedgerNote | None:
        """One message from `pods.lifecycle` or `topology.nodes`; a tombstone (None) forgets its key.

        Returns a note when the message was not followed (see the module's rules)."""
        if topic == PODS_LIFECYCLE.name:
            if isinstance(event, PodLifecycleEvent):
                return self.apply_lifecycle(event)
            if event is None and key:
                return self.release_if_gone(key)
        elif topic == TOPOLOGY_NODES.name:
            if isinstance(event, NodeTopologyEvent):
                self.apply_topology(event)
            elif event is None and key:
                self.forget_node(key)

        return None

    def apply_lifecycle(self, event: PodLifecycleEvent) -> LedgerNote | None:
        if event.phase is LifecyclePhase.DELETED or not event.node:
            return self.release_if_gone(event.uid)
        if not self._pod_bound_on(event.uid, event.node):
            return LedgerNote.BOUND_UNCONFIRMED  # a forged "bound" for a pod that never existed holds nothing
        was_bound = self.is_bound(event.uid)
        kept = self.record_bound(Holding(pod_uid=event.uid, node=event.node, devices=event.devices))
        if not was_bound:
            self._reported_only.add(event.uid)
        return None if kept is None else LedgerNote.EDIT_IGNORED

    def apply_api_pod(self, pod_uid: str, pod: PodView | None) -> LedgerNote | None:
        """The API server's pod as the watch saw it (None: it left the cluster)."""
        if pod is None or pod.finished:
            self.release(pod_uid)
            return None
        if not pod.node_name or pod.devices is None:
            return None
        kept = self.record_bound(Holding(pod_uid=pod_uid, node=pod.node_name, devices=pod.devices))
        return None if kept is None else LedgerNote.EDIT_IGNORED

    def release_if_gone(self, pod_uid: str) -> LedgerNote | None:
        if self.holding(pod_uid) is None:
            return None
        if not self._pod_gone(pod_uid):
            return LedgerNote.DELETE_REFUSED
        self.release(pod_uid)
        return None

    def apply_topology(self, event: NodeTopologyEvent) -> None:
        self.set_node_devices(event.node, event.devices)

    # --- the check before a binding -----------------------------------------------------

    def collisions(
        self,
        pod_uid: str,
        node: str,
        devices: Iterable[DeviceAssignment],
        held: Mapping[int, Mapping[str, DeviceAssignment]] | None = None,
    ) -> tuple[str, ...]:
        """Why these devices cannot go to this pod, one reason per device; empty when they fit.

        The pod's own shares are left out: a re-delivered placement for a pod that
        already holds exactly these devices is not a collision. `held`: shares counted beside
        the holders' (device index -> holder's name -> share), the room of nominated pods.
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
            others.update(held.get(share.index, {}) if held is not None else {})
            reason = _device_collision(node, share, None if capacity is None else capacity[share.index], others)
            if reason:
                reasons.append(reason)
        return tuple(reasons)


def _larger(a: DeviceAssignment, b: DeviceAssignment) -> DeviceAssignment:
    """The share that takes at least what both take (memory 0 = all of it)."""
    memory = 0 if 0 in (a.memory_mib, b.memory_mib) else max(a.memory_mib, b.memory_mib)
    return msgspec.structs.replace(a, memory_mib=memory, cores=max(a.cores, b.cores))


def _same_devices(a: tuple[DeviceAssignment, ...], b: tuple[DeviceAssignment, ...]) -> bool:
    return {(d.index, d.memory_mib, d.cores) for d in a} == {(d.index, d.memory_mib, d.cores) for d in b}
