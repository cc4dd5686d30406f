"""Room held for a nominated pod: its own devices and shares, never given to a third pod.

After a preemption the binder reserves, on the nominated node, the device shares the placer chose
for the preemptor there (the placement's `nominated_devices`), and nothing more: a placement of a
pod whose devices do not fit beside them is refused (a conflict; the placer plans it again). Whom
a reservation holds room from, and what it holds, is the engine's rule (engine/decide/preempt/
nominated.py, kube's addNominatedPods): pods of LOWER OR EQUAL priority, its own request; the
placer counts the same room in its decisions, so the two never disagree about a placement. The
rest of what the victims freed (the rest of a shared device, devices beyond the preemptor's) is
anyone's. A reservation ends when the preemptor is bound, or is gone, or `hold_seconds` after it
was made; one that ends unbound made a wasted preemption (its victims were evicted for nothing),
counted in metrics.

A restarted binder rebuilds the reservations from the cluster: every pending pod of ours with
status.nominatedNodeName is reserved on that node for `hold_seconds` from when the binder first saw
it, for the wasted-preemption count. Which devices the placer chose for it is not recorded in the
cluster, so such a reservation holds no device until a placement naming them comes again (a
redelivered nominating placement does); meanwhile the placer's own hold, rebuilt from the
placements topic, keeps pods off them. Holding the whole node instead would refuse what the
placer's rule allows, and two pods nominated to one node would refuse each other until expiry.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from engine.core.model import Allocation
from engine.decide.preempt.nominated import NominatedRoom, held_from, held_shares
from schemas.events import DeviceAssignment, PlacementEvent
from services.binder import metrics
from services.binder.cluster_view import ClusterView
from services.binder.ledger import DeviceLedger

DEFAULT_HOLD_SECONDS = 300.0


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    preemptor: str  # pod uid
    pod: str  # namespace/name, for the reason
    node: str
    priority: int
    devices: tuple[DeviceAssignment, ...]  # the shares the preemptor gets there; (): none known
    victims: int
    expires_at: float

    def room(self) -> NominatedRoom:
        """The reservation as the engine's rule reads it."""
        shares = tuple(
            Allocation(pod_uid=self.preemptor, index=d.index, memory_mib=d.memory_mib, cores=d.cores)
            for d in self.devices
        )
        return NominatedRoom(
            holder=self.preemptor, key=self.pod, node=self.node, priority=self.priority, devices=shares
        )


class Reservations:
    def __init__(
        self,
        *,
        hold_seconds: float = DEFAULT_HOLD_SECONDS,
        pod_gone: Callable[[str], bool] = lambda uid: False,
    ) -> None:
        self.hold_seconds = hold_seconds
        self._pod_gone = pod_gone
        self._by_preemptor: dict[str, Reservation] = {}

    def reserve(
        self,
        preemptor: str,
        pod: str,
        node: str,
        priority: int,
        devices: tuple[DeviceAssignment, ...],
        victims: int,
        now: float,
    ) -> None:
        """Hold `devices` on `node` for the preemptor (again: the latest devices named, the clock restarts)."""
        known = self._by_preemptor.get(preemptor)
        if known is not None and known.node == node:  # again (a re-delivery, a restart)
            devices = devices or known.devices
            victims += known.victims
        self._by_preemptor[preemptor] = Reservation(
            preemptor=preemptor,
            pod=pod,
            node=node,
            priority=priority,
            devices=devices,
            victims=victims,
            expires_at=now + self.hold_seconds,
        )
        metrics.RESERVATIONS.set(len(self._by_preemptor))

    def rebuild(self, preemptor: str, pod: str, node: str, priority: int, now: float) -> None:
        """A nomination found in the cluster (after a restart): its devices are not known there."""
        if preemptor not in self._by_preemptor:
            self.reserve(preemptor, pod, node, priority, (), 0, now)

    def bound(self, preemptor: str) -> None:
        """The preemptor is bound: its room is its own."""
        if self._by_preemptor.pop(preemptor, None) is not None:
            metrics.RESERVATIONS.set(len(self._by_preemptor))

    def expire(self, now: float) -> list[Reservation]:
        """End the reservations past their time or of preemptors gone; count their victims as wasted."""
        ended = [r for r in self._by_preemptor.values() if r.expires_at < now or self._pod_gone(r.preemptor)]
        for reservation in ended:
            del self._by_preemptor[reservation.preemptor]
            metrics.WASTED_PREEMPTIONS.inc(reservation.victims)
        if ended:
            metrics.RESERVATIONS.set(len(self._by_preemptor))
        return ended

    def held_from(self, uid: str, priority: int, node: str, now: float) -> list[NominatedRoom]:
        """The rooms on `node` that a pod `uid` of `priority` must leave alone (the engine's rule)."""
        self.expire(now)
        rooms = [r.room() for r in self._by_preemptor.values() if r.node == node]
        return held_from(rooms, priority, (uid,))

    def of(self, preemptor: str) -> Reservation | None:
        return self._by_preemptor.get(preemptor)

    def __len__(self) -> int:
        return len(self._by_preemptor)


def nominated_holders(rooms: list[NominatedRoom], node: str) -> dict[int, dict[str, DeviceAssignment]]:
    """The rooms' shares on `node` as the ledger counts holders: device index -> holder -> share."""
    names = {room.holder: f"{room.key} (nominated)" for room in rooms}
    holders: dict[int, dict[str, DeviceAssignment]] = {}
    for share in held_shares(rooms, node):
        assignment = DeviceAssignment(index=share.index, memory_mib=share.memory_mib, cores=share.cores)
        holders.setdefault(share.index, {})[names[share.pod_uid]] = assignment
    return holders


class HeldRoom:
    """The reservations as the binder's checks read them: rebuilt from the watch once it has listed the pods."""

    def __init__(self, reservations: Reservations, cluster: ClusterView, clock: Callable[[], float]) -> None:
        self.reservations = reservations
        self._cluster = cluster
        self._clock = clock
        self._rebuilt = False

    def refusal(self, placement: PlacementEvent, ledger: DeviceLedger) -> str | None:
        """Why the placement's devices do not fit beside the room held for nominated pods (its holders'
        shares counted by `ledger`); None when they do."""
        now = self._clock()
        cluster = self._cluster
        if not self._rebuilt and cluster.pods_synced:
            self._rebuilt = True
            for uid, pod in cluster.nominated():
                namespace, name = cluster.pod_name(uid) or ("", "")
                if pod.scheduler_name == cluster.scheduler_name:
                    self.reservations.rebuild(uid, f"{namespace}/{name}", pod.nominated_node, pod.priority, now)
        if not placement.devices:
            return None
        known = cluster.pod(placement.uid)
        priority = known.priority if known is not None else 0
        rooms = self.reservations.held_from(placement.uid, priority, placement.node, now)
        holders = nominated_holders(rooms, placement.node)
        if not holders:
            return None
        reasons = ledger.collisions(placement.uid, placement.node, placement.devices, held=holders)
        if not reasons:
            return None
        wanted = {d.index for d in placement.devices}
        pods = ", ".join(sorted({room.key for room in rooms if any(s.index in wanted for s in room.devices)}))
        return f"room on node {placement.node} is held for pod {pods}, nominated there: {'; '.join(reasons)}"
