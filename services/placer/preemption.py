"""Preemption in the placer: make room for a pod that fits nowhere, and hold that room for it.

A pending pod that no node can take now is handed to `Engine.preempt` (kube's DefaultPreemption,
with victims chosen by the devices they free), over the pods the cluster reports running, with
their priority, start time and labels, and the PodDisruptionBudgets of disruption.budgets. When
eviction helps, the decision stays UNSCHEDULABLE (the pod cannot run yet) and names the node the
pod is nominated to and the victims; the binder evicts them and nominates the pod.

A nomination holds the room its victims free: every decision for a pod of lower or equal
priority counts the nominated pod's requests on that node (the engine's `with_nominated`), so
no such pod takes it. It lasts until the pod is placed, bound or deleted, or `nomination_seconds`
after it was decided. While its victims are still running the pod waits (no second preemption);
once they are gone it is decided again like any pod, and lands on that node if it still fits.

Nominations are rebuilt from the placements topic, which the placer replays from offset 0.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import msgspec

from engine import Allocation, ClusterIndex, Engine, Mode, NodeState, PodRequest, Snapshot
from engine.decide.preempt import DisruptionBudget, Preemptor, RunningPod
from engine.decide.preempt.nominated import with_nominated
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


def held_room(nominations: Sequence[Nomination]) -> list[RunningPod]:
    """The nominated pods as the engine counts them on their nodes (requests and one pod slot)."""
    return [
        RunningPod(
            namespace=n.namespace, name=n.name, node=n.node, holder=n.uid, priority=n.priority, requests=n.requests
        )
        for n in nominations
    ]


@contextmanager
def holding_nominated(
    index: ClusterIndex, nominations: Sequence[Nomination], priority: int, own: str
) -> Iterator[ClusterIndex]:
    """The index with the nominated pods' room held on their nodes from a pod of `priority` (kube's
    RunFilterPluginsWithNominatedPods), restored afterwards. `own`: the pod placed (namespace/name)."""
    names = sorted({n.node for n in nominations if index.get(n.node) is not None})
    if not names:
        yield index
        return
    before = [index.node(name) for name in names]
    holding = [n for n in nominations if n.priority >= priority and f"{n.namespace}/{n.name}" != own]
    held = with_nominated(Snapshot(nodes=tuple(before)), held_room(holding), priority, own)
    try:
        for node in held.nodes:
            index.upsert(_with_devices(node, holding))
        yield index
    finally:
        for node in before:
            index.upsert(node)


def _with_devices(node: NodeState, nominations: Sequence[Nomination]) -> NodeState:
    """The node with the devices each nominated pod gets there allocated to it (the engine counts a
    device pod's room by devices, not by its extended-resource request)."""
    extra = tuple(
        Allocation(pod_uid=n.uid, index=d.index, memory_mib=d.memory_mib, cores=d.cores)
        for n in nominations
        if n.node == node.name
        for d in n.devices
    )
    return msgspec.structs.replace(node, allocations=node.allocations + extra) if extra else node


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
    others = [n for n in seen.nominations if n.uid != pending.uid and n.priority >= pending.priority]
    counted = with_nominated(seen.snapshot, held_room(others), pending.priority, own)
    snapshot = msgspec.structs.replace(counted, nodes=tuple(_with_devices(n, others) for n in counted.nodes))
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
