"""What to publish when the cluster changes: the watcher's memory, as pure state machines.

Each tracker remembers what it last published per key, so an object that
changed in ways nobody downstream reads (a status heartbeat, an annotation
written before binding) publishes nothing, and a relist can tell which
objects disappeared while the watch was down. `force` re-publishes
everything (the periodic resync: a pending pod whose event was lost gets
another chance, a compacted topic is rebuilt).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import msgspec

from schemas import topics
from schemas.events import Event, HyperNodeEvent, NodeStatusEvent, PodLifecycleEvent
from services.collector import watch_translate as tr
from services.collector.watch_objects import HyperNode, Node, Pod


class Publication(msgspec.Struct, frozen=True, kw_only=True):
    topic: str
    key: str
    event: Event | None  # None: a tombstone
    pending_pod: bool = False  # published inside its own "pod.pending" span


class Outcome(msgspec.Struct, kw_only=True):
    publications: list[Publication] = []
    problems: list[tr.Problem] = []

    def extend(self, other: Outcome) -> Outcome:
        self.publications.extend(other.publications)
        self.problems.extend(other.problems)
        return self


def _same(a: Event | None, b: Event | None) -> bool:
    """Equal apart from when they were observed (and, for nodes, the resourceVersion)."""
    if a is None or b is None:
        return a is b
    fields = {"observed_at": 0.0}
    if isinstance(a, NodeStatusEvent):
        fields["resource_version"] = ""  # type: ignore[assignment]
    return msgspec.structs.replace(a, **fields) == msgspec.structs.replace(b, **fields)


# --- pods -------------------------------------------------------------------------------------


class _KnownPod(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    bound: PodLifecycleEvent | None  # None: pending


class PodTracker:
    """Pods naming our scheduler: pending -> pods.pending; bound, finished, deleted -> pods.lifecycle."""

    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self._known: dict[str, _KnownPod] = {}

    def __len__(self) -> int:
        return len(self._known)

    def seed(self, bound: Iterable[PodLifecycleEvent]) -> None:
        """Pods published as bound before a restart, so a relist can report those deleted meanwhile."""
        for event in bound:
            self._known[event.uid] = _KnownPod(namespace=event.namespace, name=event.name, bound=event)

    def observe(self, pod: Pod, now: float, *, force: bool = False) -> Outcome:
        if not tr.is_ours(pod, self.scheduler_name):
            return Outcome()
        uid = pod.metadata.uid
        if tr.is_finished(pod):
            return self.gone(uid, now)  # a finished pod's devices are free
        known = self._known.get(uid)
        if tr.is_pending(pod):
            if known is not None and known.bound is None and not force:
                return Outcome()
            pending, problems = tr.pending_event(pod, now)
            self._known[uid] = _KnownPod(namespace=pod.metadata.namespace, name=pod.metadata.name, bound=None)
            publication = Publication(topic=topics.PODS_PENDING.name, key=uid, event=pending, pending_pod=True)
            return Outcome(publications=[publication], problems=problems)
        bound, problems = tr.bound_event(pod, now)
        if known is not None and _same(known.bound, bound) and not force:
            return Outcome()
        self._known[uid] = _KnownPod(namespace=pod.metadata.namespace, name=pod.metadata.name, bound=bound)
        return Outcome(
            publications=[Publication(topic=topics.PODS_LIFECYCLE.name, key=uid, event=bound)], problems=problems
        )

    def gone(self, uid: str, now: float) -> Outcome:
        known = self._known.pop(uid, None)
        if known is None:
            return Outcome()
        node = known.bound.node if known.bound is not None else ""
        event = tr.deleted_event(uid, known.namespace, known.name, node, now)
        return Outcome(publications=[Publication(topic=topics.PODS_LIFECYCLE.name, key=uid, event=event)])

    def relisted(self, pods: list[Pod], now: float, *, force: bool = False) -> Outcome:
        """The full list of our pods: the missing ones are gone, the rest observed."""
        present = {p.metadata.uid for p in pods}
        outcome = Outcome()
        for uid in [u for u in self._known if u not in present]:
            outcome.extend(self.gone(uid, now))
        for pod in pods:
            outcome.extend(self.observe(pod, now, force=force))
        return outcome


# --- nodes and hypernodes ---------------------------------------------------------------------

T = TypeVar("T")
E = TypeVar("E", bound=Event)


class KeyedTracker(Generic[T, E]):
    """Objects published one message per key on a compacted topic."""

    def __init__(
        self,
        translate: Callable[[T, float], tuple[E, list[tr.Problem]]],
        key_of: Callable[[T], str],
        on_gone: Callable[[str, E, float], list[Publication]],
        topic: str,
    ) -> None:
        self._translate = translate
        self._key_of = key_of
        self._on_gone = on_gone
        self._topic = topic
        self._last: dict[str, E] = {}

    def __len__(self) -> int:
        return len(self._last)

    def seed(self, events: dict[str, E]) -> None:
        self._last.update(events)

    def observe(self, obj: T, now: float, *, force: bool = False) -> Outcome:
        key = self._key_of(obj)
        event, problems = self._translate(obj, now)
        if _same(self._last.get(key), event) and not force:
            return Outcome(problems=problems)
        self._last[key] = event
        return Outcome(publications=[Publication(topic=self._topic, key=key, event=event)], problems=problems)

    def gone(self, key: str, now: float) -> Outcome:
        last = self._last.pop(key, None)
        if last is None:
            return Outcome()
        return Outcome(publications=self._on_gone(key, last, now))

    def relisted(self, objs: list[T], now: float, *, force: bool = False) -> Outcome:
        present = {self._key_of(o) for o in objs}
        outcome = Outcome()
        for key in [k for k in self._last if k not in present]:
            outcome.extend(self.gone(key, now))
        for obj in objs:
            outcome.extend(self.observe(obj, now, force=force))
        return outcome


def node_tracker() -> KeyedTracker[Node, NodeStatusEvent]:
    def translate(node: Node, now: float) -> tuple[NodeStatusEvent, list[tr.Problem]]:
        return tr.node_status_event(node, now), []

    def on_gone(name: str, last: NodeStatusEvent, now: float) -> list[Publication]:
        return [Publication(topic=topics.NODES_STATUS.name, key=name, event=tr.node_deleted_event(name, now))]

    return KeyedTracker(translate, lambda n: n.metadata.name, on_gone, topics.NODES_STATUS.name)


def hypernode_tracker() -> KeyedTracker[HyperNode, HyperNodeEvent]:
    def on_gone(name: str, last: HyperNodeEvent, now: float) -> list[Publication]:
        # the deleted event tells live readers; the tombstone lets compaction drop the key
        deleted = tr.hypernode_deleted_event(name, last.tier, now)
        return [
            Publication(topic=topics.TOPOLOGY_NETWORK.name, key=name, event=deleted),
            Publication(topic=topics.TOPOLOGY_NETWORK.name, key=name, event=None),
        ]

    return KeyedTracker(tr.hypernode_event, lambda h: h.metadata.name, on_gone, topics.TOPOLOGY_NETWORK.name)
