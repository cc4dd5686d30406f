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

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import msgspec

from engine import ClusterIndex, Engine, Mode, PodRequest, Snapshot
from engine.decide.preempt import DisruptionBudget, Preemptor, RunningPod
from engine.decide.preempt.nominated import with_nominated
from schemas.events import (
    DisruptionBudgetEvent,
    LifecyclePhase,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
    PreemptionVictim,
)

DEFAULT_NOMINATION_SECONDS = 300.0


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


class Nominations:
    """Live nominations by pod uid, from our own decisions on the placements topic."""

    def __init__(self, ttl: float = DEFAULT_NOMINATION_SECONDS) -> None:
        self.ttl = ttl
        self._by_uid: dict[str, Nomination] = {}

    def apply_placement(self, event: PlacementEvent) -> None:
        if event.outcome is PlacementOutcome.PLACED:
            self._by_uid.pop(event.uid, None)  # placed: the held room becomes its own
            return
        if not event.nominated_node:
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
        )

    def apply_lifecycle(self, event: PodLifecycleEvent) -> None:
        """A pod bound or deleted is no longer nominated."""
        if event.phase is LifecyclePhase.DELETED or event.node:
            self._by_uid.pop(event.uid, None)

    def forget(self, uid: str) -> None:
        self._by_uid.pop(uid, None)

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
    held = with_nominated(Snapshot(nodes=tuple(before)), held_room(nominations), priority, own)
    try:
        for node in held.nodes:
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


def make_room(
    pending: PendingPodEvent,
    request: PodRequest,
    seen: PreemptionInput,
    *,
    engine: Engine,
    mode: Mode,
    nominated: Nomination | None,
) -> tuple[str, tuple[PreemptionVictim, ...], str]:
    """(node, victims, reason): where the pod is nominated once `victims` are gone ("" and the engine's
    reason, in kube's words, when eviction cannot help or the pod may not preempt)."""
    evicting = {uid for n in seen.nominations for uid in n.victims}
    running = [running_pod(e, evicting=e.uid in evicting) for e in seen.running]
    by_key = {p.key: e for p, e in zip(running, seen.running, strict=True)}
    own = f"{pending.namespace}/{pending.name}"
    others = [n for n in seen.nominations if n.uid != pending.uid]
    snapshot = with_nominated(seen.snapshot, held_room(others), pending.priority, own)
    preemptor = Preemptor(
        request=request,
        priority=pending.priority,
        policy=pending.preemption_policy,
        nominated_node=nominated.node if nominated is not None else pending.nominated_node,
    )
    budgets = [budget_of(b) for b in seen.budgets]
    found = engine.preempt(snapshot, preemptor, running, budgets, mode)
    if found.node is None:
        return "", (), found.reason
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
    return found.node, victims, ""
