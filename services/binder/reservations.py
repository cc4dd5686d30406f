"""Room held for a nominated pod: the devices its victims free go to it, never to a third pod.

After a preemption the binder reserves, on the nominated node, the devices the victims held, for
the preemptor: a placement of another pod of lower or equal priority that takes one of them is
refused (a conflict; the placer plans it again). A reservation ends when the preemptor is bound,
or is gone, or `hold_seconds` after it was made; one that ends unbound made a wasted preemption
(its victims were evicted for nothing), counted in metrics.

A restarted binder rebuilds the reservations from the cluster: every pending pod of ours with
status.nominatedNodeName holds that node's devices (which of them its victims freed is not
recorded in the cluster, so all of them, the safe side) from pods of lower or equal priority,
for `hold_seconds` from when the binder first saw it.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from schemas.events import DeviceAssignment, PlacementEvent
from services.binder import metrics
from services.binder.cluster_view import ClusterView

DEFAULT_HOLD_SECONDS = 300.0


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    preemptor: str  # pod uid
    pod: str  # namespace/name, for the reason
    node: str
    priority: int
    devices: frozenset[int] | None  # device indices held; None: every device of the node
    victims: int
    expires_at: float


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
        devices: frozenset[int] | None,
        victims: int,
        now: float,
    ) -> None:
        """Hold `devices` on `node` for the preemptor (again: the hold grows, its clock restarts)."""
        known = self._by_preemptor.get(preemptor)
        if known is not None and known.node == node:  # again (a re-delivery, a restart): the hold only grows
            devices = None if known.devices is None or devices is None else known.devices | devices
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
        """A nomination found in the cluster (after a restart): the whole node's devices, unless known."""
        if preemptor not in self._by_preemptor:
            self.reserve(preemptor, pod, node, priority, None, 0, now)

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

    def collision(
        self, uid: str, priority: int, node: str, devices: tuple[DeviceAssignment, ...], now: float
    ) -> str | None:
        """Why a placement of pod `uid` (of `priority`) may not take these devices on `node`; None: it may."""
        if not devices:
            return None
        self.expire(now)
        wanted = {d.index for d in devices}
        for reservation in self._by_preemptor.values():
            if reservation.node != node or reservation.preemptor == uid or reservation.priority < priority:
                continue
            held = wanted if reservation.devices is None else wanted & reservation.devices
            if held:
                listed = ", ".join(str(i) for i in sorted(held))
                return f"device(s) {listed} on node {node} are held for pod {reservation.pod}, nominated there"
        return None

    def of(self, preemptor: str) -> Reservation | None:
        return self._by_preemptor.get(preemptor)

    def __len__(self) -> int:
        return len(self._by_preemptor)


class HeldRoom:
    """The reservations as the binder's checks read them: rebuilt from the watch once it has listed the pods."""

    def __init__(self, reservations: Reservations, cluster: ClusterView, clock: Callable[[], float]) -> None:
        self.reservations = reservations
        self._cluster = cluster
        self._clock = clock
        self._rebuilt = False

    def refusal(self, placement: PlacementEvent) -> str | None:
        """Why the placement may not take its devices (held for a nominated pod); None when it may."""
        now = self._clock()
        cluster = self._cluster
        if not self._rebuilt and cluster.pods_synced:
            self._rebuilt = True
            for uid, pod in cluster.nominated():
                namespace, name = cluster.pod_name(uid) or ("", "")
                if pod.scheduler_name == cluster.scheduler_name:
                    self.reservations.rebuild(uid, f"{namespace}/{name}", pod.nominated_node, pod.priority, now)
        known = cluster.pod(placement.uid)
        priority = known.priority if known is not None else 0
        return self.reservations.collision(placement.uid, priority, placement.node, placement.devices, now)
