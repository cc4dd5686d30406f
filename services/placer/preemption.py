"""Preemption in the placer: make room for a pod that fits nowhere, and hold that room for it.

A pending pod that no node can take now is handed to `Engine.preempt` (kube's DefaultPreemption,
with victims chosen by the devices they free), over the pods the cluster reports running, with
their priority, start time and labels, and the PodDisruptionBudgets of disruption.budgets. When
eviction helps, the decision stays UNSCHEDULABLE (the pod cannot run yet) and names the node the
pod is nominated to and the victims; the binder evicts them and nominates the pod.

A nomination holds the nominated pod's own room, and nothing more: every decision for a pod of
lower or equal priority counts the nominated pod's requests and the device shares it gets there
on that node (the engine's `with_nominated`, the rule the binder's check follows too), so no
such pod takes them; the rest of what its victims free is anyone's. It lasts until the pod is
placed, bound or deleted, or `nomination_seconds` after it was decided. While its victims are
still running the pod waits (no second preemption); once they are gone it is decided again like
any pod, and lands on that node if it still fits.

Nominations are rebuilt from the placements topic, which the placer replays from offset 0.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager

import msgspec

from engine import Allocation, ClusterIndex, Engine, Mode, PodRequest, Snapshot
from engine.decide.preempt import DisruptionBudget, Preemptor, RunningPod
from engine.decide.preempt.nominated import NominatedRoom, with_nominated, with_nominated_nodes
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    DisruptionBudgetEvent,
    LifecyclePhase,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
    PreemptionVictim,
)

DEFAULT_NOMINATION_SECONDS = 300.0
SETTLED_BOUND = 200_000  # pods remembered as placed, bound or deleted (uid and time), the oldest go first


class Nomination(msgspec.Struct, frozen=True, kw_only=True):
    """A pending pod nominated to a node by a preemption, and the pods evicted for it."""

    uid: str
    namespace: str
    name: str
    node: str
    priority: int
    requests: dict[str, str]
    victims: tuple[str, ...]  # uids
    decided_at: float
    decision_id: str = ""
    devices: tuple[DeviceAssignment, ...] = ()  # the devices it gets there: held from others too


class Nominations:
    """Live nominations by pod uid, from our own decisions on the placements topic."""

    def __init__(self, ttl: float = DEFAULT_NOMINATION_SECONDS) -> None:
        self.ttl = ttl
        self._by_uid: dict[str, Nomination] = {}
        # When each pod was placed (decided_at), or inf once bound or deleted: a nomination decided
        # before that is over. Placements are keyed by node, nominations by pod: replayed from
        # different partitions, a nomination may come after the placement that ended it.
        self._settled: OrderedDict[str, float] = OrderedDict()

    def _settle(self, uid: str, at: float) -> None:
        self._by_uid.pop(uid, None)
        self._settled[uid] = max(at, self._settled.get(uid, at))
        self._settled.move_to_end(uid)
        while len(self._settled) > SETTLED_BOUND:
            self._settled.popitem(last=False)

    def apply_placement(self, event: PlacementEvent) -> None:
        if event.outcome is PlacementOutcome.PLACED:
            self._settle(event.uid, event.decided_at)  # placed: the held room becomes its own
            return
        if not event.nominated_node or event.decided_at <= self._settled.get(event.uid, -math.inf):
            return
        known = self._by_uid.get(event.uid)
        if known is not None and known.decided_at > event.decided_at:
            return  # replayed out of order: the later nomination stands
        victims = tuple(v.uid for v in event.victims)
        if not victims and known is not None and known.node == event.nominated_node:
            victims = known.victims  # "still waiting" keeps the victims it waits for
        self._by_uid[event.uid] = Nomination(
            uid=event.uid,
            namespace=event.namespace,
            name=event.name,
            node=event.nominated_node,
            priority=event.priority,
            requests=dict(event.requests),
            victims=victims,
            decided_at=event.decided_at,
            decision_id=event.decision_id,
            devices=event.nominated_devices or (known.devices if known is not None else ()),
        )

    def apply_lifecycle(self, event: PodLifecycleEvent) -> None:
        """A pod bound or deleted is no longer nominated."""
        if event.phase is LifecyclePhase.DELETED or event.node:
            self._settle(event.uid, math.inf)

    def apply_binding(self, event: BindingEvent) -> None:
        """The binder could not carry the preemption out (conflict, failed): its victims may never go."""
        known = self._by_uid.get(event.uid)
        refused = event.outcome in (BindingOutcome.CONFLICT, BindingOutcome.FAILED)
        if known is not None and refused and known.decision_id == event.decision_id:
            del self._by_uid[event.uid]

    def forget(self, uid: str) -> None:
        self._settle(uid, math.inf)

    def live(self, now: float) -> list[Nomination]:
        return [n for _, n in sorted(self._by_uid.items()) if now - n.decided_at <= self.ttl]

    def of(self, uid: str, now: float) -> Nomination | None:
        found = self._by_uid.get(uid)
        return found if found is not None and now - found.decided_at <= self.ttl else None

    def __len__(self) -> int:
        return len(self._by_uid)


def room_held(nomination: Nomination) -> NominatedRoom:
    """A nomination as the shared rule reads it: the pod's requests and the device shares it gets there."""
    return NominatedRoom(
        holder=nomination.uid,
        key=f"{nomination.namespace}/{nomination.name}",
        node=nomination.node,
        priority=nomination.priority,
        requests=nomination.requests,
        devices=tuple(
            Allocation(pod_uid=nomination.uid, index=d.index, memory_mib=d.memory_mib, cores=d.cores)
            for d in nomination.devices
        ),
    )


@contextmanager
def holding_nominated(
    index: ClusterIndex, nominations: Sequence[Nomination], priority: int, own: Collection[str]
) -> Iterator[ClusterIndex]:
    """The index with the nominated pods' room held on their nodes from a pod of `priority` (the
    engine's `held_from`, kube's RunFilterPluginsWithNominatedPods), restored afterwards. `own`: the
    pod placed, or every member of its gang (uids or namespace/names)."""
    rooms = [room_held(n) for n in nominations if index.get(n.node) is not None]
    held = with_nominated_nodes([index.node(name) for name in sorted({r.node for r in rooms})], rooms, priority, own)
    if not held:
        yield index
        return
    before = [index.node(node.name) for node in held]
    try:
        for node in held:
            index.upsert(node)
        yield index
    finally:
        for node in before:
            index.upsert(node)


def budget_of(event: DisruptionBudgetEvent) -> DisruptionBudget:
    return DisruptionBudget(
        namespace=event.namespace,
        name=event.name,
        selector=event.selector,
        disruptions_allowed=event.disruptions_allowed,
        disrupted_pods=event.disrupted_pods,
    )


def running_pod(event: PodLifecycleEvent, *, evicting: bool) -> RunningPod:
    """A bound pod as preemption weighs it; `evicting`: a live nomination already evicts it."""
    return RunningPod(
        namespace=event.namespace,
        name=event.name,
        node=event.node,
        holder=event.uid,
        priority=event.priority,
        start_time=event.started_at or None,
        labels=dict(event.labels),
        requests=dict(event.requests),
        terminating_by_preemption=event.terminating_by_preemption or evicting,
    )


class PreemptionInput(msgspec.Struct, frozen=True, kw_only=True):
    """What one preemption reads of the view."""

    snapshot: Snapshot
    running: tuple[PodLifecycleEvent, ...]
    budgets: tuple[DisruptionBudgetEvent, ...]
    nominations: tuple[Nomination, ...]


class Room(msgspec.Struct, frozen=True, kw_only=True):
    """Where a pod is nominated once `victims` are gone and the devices it gets there; `node` "": none,
    and `reason` says why (the engine's words)."""

    node: str = ""
    victims: tuple[PreemptionVictim, ...] = ()
    devices: tuple[DeviceAssignment, ...] = ()
    reason: str = ""


def make_room(
    pending: PendingPodEvent,
    request: PodRequest,
    seen: PreemptionInput,
    *,
    engine: Engine,
    mode: Mode,
    nominated: Nomination | None,
) -> Room:
    """Where the pod runs by evicting lower-priority pods, and which (Engine.preempt)."""
    evicting = {uid for n in seen.nominations for uid in n.victims}
    # A gang member is no victim of a single pod: evicting it could leave its gang below minMember
    # (whole-gang victims are the engine's gang preemption); it only holds its room.
    candidates = [e for e in seen.running if not e.gang]
    running = [running_pod(e, evicting=e.uid in evicting) for e in candidates]
    by_key = {p.key: e for p, e in zip(running, candidates, strict=True)}
    own = f"{pending.namespace}/{pending.name}"
    rooms = [room_held(n) for n in seen.nominations]
    snapshot = with_nominated(seen.snapshot, rooms, pending.priority, (pending.uid, own))
    preemptor = Preemptor(
        request=request,
        priority=pending.priority,
        policy=pending.preemption_policy,
        nominated_node=nominated.node if nominated is not None else pending.nominated_node,
    )
    budgets = [budget_of(b) for b in seen.budgets]
    found = engine.preempt(snapshot, preemptor, running, budgets, mode)
    if found.node is None:
        return Room(reason=found.reason)
    if not found.victims:  # it fits there without evicting anyone: pods left since it was decided
        return Room(reason="preemption: a node has room now; the pod is decided again")
    victims = tuple(
        PreemptionVictim(
            uid=by_key[v.pod].uid,
            namespace=by_key[v.pod].namespace,
            name=by_key[v.pod].name,
            priority=v.priority,
            violates_budget=v.violates_budget,
        )
        for v in found.victims
    )
    devices = found.decision.devices if found.decision is not None else ()
    return Room(node=found.node, victims=victims, devices=devices)
