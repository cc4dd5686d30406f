"""Namespaces (-> the namespaces topic) and the workloads whose selectors make a pod's DefaultSelector.

Namespaces are published one per key, their labels being what pod affinity's namespaceSelector
reads. Services, ReplicationControllers, ReplicaSets and StatefulSets are not published: their
selectors are kept (engine.decide.kube.default_selector.WorkloadSelectors) for the pending pods'
events, and a change to one publishes again the pending pods of its namespace, whose default
spread may have changed (PodTracker.selectors_changed).
"""

from __future__ import annotations

from typing import Any

import msgspec

from engine.decide.kube.default_selector import WorkloadSelectors
from schemas import topics
from schemas.events import NamespaceEvent
from schemas.kube import LabelSelector
from services.collector.cluster import translate as tr
from services.collector.cluster.objects import ObjectMeta
from services.collector.cluster.trackers import KeyedTracker, Outcome, PodTracker, Publication

# --- namespaces -------------------------------------------------------------------------------


class Namespace(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


def namespace_event(namespace: Namespace, observed_at: float) -> tuple[NamespaceEvent, list[tr.Problem]]:
    meta = namespace.metadata
    return NamespaceEvent(name=meta.name, labels=dict(meta.labels), observed_at=observed_at), []


def namespace_tracker() -> KeyedTracker[Namespace, NamespaceEvent]:
    def on_gone(name: str, last: NamespaceEvent, now: float) -> list[Publication]:
        deleted = NamespaceEvent(name=name, deleted=True, observed_at=now)
        return [
            Publication(topic=topics.NAMESPACES.name, key=name, event=deleted),
            Publication(topic=topics.NAMESPACES.name, key=name, event=None),
        ]

    return KeyedTracker(namespace_event, lambda n: n.metadata.name, on_gone, topics.NAMESPACES.name)


# --- the workloads behind the DefaultSelector -------------------------------------------------


class _Spec(msgspec.Struct, kw_only=True):
    selector: Any = None  # a map (Service, ReplicationController) or a LabelSelector (the others)


class Workload(msgspec.Struct, kw_only=True):
    """A Service, ReplicationController, ReplicaSet or StatefulSet: who it is and its selector."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: _Spec = msgspec.field(default_factory=_Spec)


def workload_key(workload: Workload) -> str:
    return f"{workload.metadata.namespace}/{workload.metadata.name}"


class SelectorsOfPods:
    """One kind's selectors, kept in the pods' WorkloadSelectors (the Tracker protocol of kinds.py).

    `kind`: "Service", or the controller kind a pod's ownerReference names."""

    def __init__(self, kind: str, pods: PodTracker) -> None:
        self.kind = kind
        self._pods = pods
        self._keys: set[str] = set()

    @property
    def _selectors(self) -> WorkloadSelectors:
        return self._pods.selectors

    def relisted(self, objs: list[Workload], now: float, *, force: bool = False) -> Outcome:
        outcome = Outcome()
        present = {workload_key(w) for w in objs}
        for key in sorted(self._keys - present):
            outcome.extend(self.gone(key, now))
        for workload in objs:
            outcome.extend(self.observe(workload, now))
        return outcome

    def observe(self, obj: Workload, now: float) -> Outcome:
        meta = obj.metadata
        problems: list[tr.Problem] = []
        self._keys.add(workload_key(obj))
        if self.kind == "Service":
            selector = _map(obj, problems)
            changed = self._selectors.services.get(meta.namespace, {}).get(meta.name) != (selector or None)
            self._selectors.set_service(meta.namespace, meta.name, selector)
        else:
            if self.kind == "ReplicationController":
                found = _map(obj, problems)
                labelled = LabelSelector(match_labels=found) if found else None
            else:
                labelled = _selector(obj, problems)
            before = self._selectors.controllers.get((self.kind, workload_key(obj)))
            self._selectors.set_controller(self.kind, meta.namespace, meta.name, labelled)
            changed = before != self._selectors.controllers.get((self.kind, workload_key(obj)))
        outcome = self._pods.selectors_changed(meta.namespace, now) if changed else Outcome()
        outcome.problems.extend(problems)
        return outcome

    def gone(self, key: str, now: float) -> Outcome:
        if key not in self._keys:
            return Outcome()
        self._keys.discard(key)
        namespace, name = key.split("/", 1)
        if self.kind == "Service":
            self._selectors.drop_service(namespace, name)
        else:
            self._selectors.drop_controller(self.kind, namespace, name)
        return self._pods.selectors_changed(namespace, now)


def _map(workload: Workload, problems: list[tr.Problem]) -> dict[str, str] | None:
    try:
        return msgspec.convert(workload.spec.selector, dict[str, str] | None)
    except msgspec.ValidationError as exc:
        problems.append(_problem(workload, str(exc)))
        return None


def _selector(workload: Workload, problems: list[tr.Problem]) -> LabelSelector | None:
    try:
        return msgspec.convert(workload.spec.selector, LabelSelector | None)
    except msgspec.ValidationError as exc:
        problems.append(_problem(workload, str(exc)))
        return None


def _problem(workload: Workload, reason: str) -> tr.Problem:
    return tr.Problem(object=tr.who(workload.metadata), field="spec.selector", reason=reason)
