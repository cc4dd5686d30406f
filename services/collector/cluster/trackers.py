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

from engine.decide.kube.default_selector import WorkloadSelectors
from schemas import topics
from schemas.events import (
    Event,
    HyperNodeEvent,
    LifecyclePhase,
    NodeStatusEvent,
    PendingPodEvent,
    PodLifecycleEvent,
    RunningMember,
    TopologyLevelsEvent,
)
from schemas.kube import LabelSelector
from schemas.seal import DecisionKey
from services.collector.cluster import gangs, network
from services.collector.cluster import translate as tr
from services.collector.cluster.gangs import GangTracker
from services.collector.cluster.objects import HyperNode, Node, Pod, PodGroup, Topology
from services.collector.cluster.pod_topology import controller_of


class Publication(msgspec.Struct, frozen=True, kw_only=True):
    topic: str
    key: str
    event: Event | None  # None: a tombstone


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

_encoder = msgspec.json.Encoder()


def _digest(event: PodLifecycleEvent) -> int:
    """What a bound pod's event says, apart from when it was seen, in 8 bytes instead of the event."""
    return hash(_encoder.encode(msgspec.structs.replace(event, observed_at=0.0)))


class _KnownPod(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """All the tracker keeps of a pod: enough to report it deleted and to tell a real change."""

    namespace: str
    name: str
    ours: bool
    gang: str = ""
    node: str = ""
    bound: int | None = None  # digest of the bound event published; None: pending (ours)
    claims: tuple[str, ...] = ()  # names of the pending pod's DRA claims ("" while a template's is not made)
    pending: PendingPodEvent | None = None  # a pending pod with claims: published again when one appears


class PodTracker:
    """Every pod on a node -> pods.lifecycle; pods of ours without a node -> pods.pending, or into their gang.

    Pending pods of other schedulers and gated pods are not tracked at all. Gang
    members go to the GangTracker, whose gangs are flushed after each change
    (after the whole list on a relist, so a gang goes out once).
    """

    def __init__(self, scheduler_name: str, decision_key: DecisionKey | None = None) -> None:
        """`decision_key`: the seal's key; a bound pod's devices count only from a seal it verifies."""
        self.scheduler_name = scheduler_name
        self.decision_key = decision_key
        self.gangs = GangTracker()
        self._known: dict[str, _KnownPod] = {}
        # Keys whose latest record on pods.lifecycle is "bound", as read back from the topic. This
        # watcher is its only writer: such a key it does not know after a relist is a pod gone or
        # a forged record, and gets a tombstone (else compaction keeps it, and its devices held, forever).
        self._bound_on_topic: set[str] = set()
        # The Services' and controllers' selectors (workloads.py), for the pending pods' DefaultSelector,
        # and the pending pods of ours by uid with the one their event carries, to publish them again
        # when a selector of their namespace changes.
        self.selectors = WorkloadSelectors()
        self._pending: dict[str, tuple[Pod, LabelSelector | None]] = {}
        # "<namespace>/<template>" of a ComputeDomain's channel claim template -> "<namespace>/<domain>"
        self.compute_domains: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._known)

    def seed(self, bound: Iterable[PodLifecycleEvent]) -> None:
        """Pods published as bound before a restart, so a relist can report those deleted meanwhile."""
        for event in bound:
            self._bound_on_topic.add(event.uid)
            self._known[event.uid] = _KnownPod(
                namespace=event.namespace,
                name=event.name,
                ours=event.ours,
                gang=event.gang,
                node=event.node,
                bound=_digest(event),
            )

    def on_topic(self, key: str, event: Event | None) -> None:
        """A pods.lifecycle record read back from the topic (anyone's, forged ones too)."""
        if isinstance(event, PodLifecycleEvent) and event.phase is LifecyclePhase.BOUND:
            self._bound_on_topic.add(key)
        else:
            self._bound_on_topic.discard(key)

    def observe(self, pod: Pod, now: float) -> Outcome:
        return self._flush(self._observe(pod, now, force=False), now, force=False)

    def gone(self, uid: str, now: float) -> Outcome:
        return self._flush(self._gone(uid, now), now, force=False)

    def relisted(self, pods: list[Pod], now: float, *, force: bool = False) -> Outcome:
        """The full list of pods: the missing ones are gone, the rest observed, then the gangs."""
        present = {p.metadata.uid for p in pods}
        outcome = Outcome()
        for uid in [u for u in self._known if u not in present]:
            outcome.extend(self._gone(uid, now))
        for pod in pods:
            outcome.extend(self._observe(pod, now, force=force))
        unlisted = sorted(k for k in self._bound_on_topic if k not in self._known)
        self._bound_on_topic.difference_update(unlisted)
        outcome.publications.extend(Publication(topic=topics.PODS_LIFECYCLE.name, key=k, event=None) for k in unlisted)
        return self._flush(outcome, now, force=force)

    def selectors_changed(self, namespace: str, now: float) -> Outcome:
        """A Service's or controller's selector in `namespace` changed: its pending pods whose DefaultSelector did."""
        outcome = Outcome()
        for _, (pod, published) in sorted(self._pending.items(), key=lambda item: item[0]):
            if pod.metadata.namespace == namespace and self._default_selector(pod) != published:
                outcome.extend(self._observe(pod, now, force=True))
        return self._flush(outcome, now, force=False)

    def _default_selector(self, pod: Pod) -> LabelSelector | None:
        meta = pod.metadata
        return self.selectors.default_selector(meta.namespace, meta.labels, controller_of(pod))

    def claim_appeared(self, namespace: str, name: str, now: float) -> Outcome:
        """A ResourceClaim now exists: the pending pods naming it are published again, so the placer,
        which told them the claim was missing, decides them with it."""
        naming = [(uid, k) for uid, k in sorted(self._known.items()) if k.namespace == namespace and name in k.claims]
        waiting = [
            Publication(topic=topics.PODS_PENDING.name, key=uid, event=known.pending)
            for uid, known in naming
            if known.pending is not None
        ]
        for gang in sorted({known.gang for _, known in naming if known.gang and known.bound is None}):
            self.gangs.again(gang)  # its members' claims are read again as it goes out
        return self._flush(Outcome(publications=waiting), now, force=False)

    def compute_domain(self, namespace: str, template: str, domain: str | None, now: float) -> Outcome:
        """The ComputeDomain whose channel's claim template is `template` (None: none now): the pending
        pods made from that template go out again, their claims naming it."""
        key = f"{namespace}/{template}"
        if self.compute_domains.get(key) == domain:
            return Outcome()
        if domain is None:
            self.compute_domains.pop(key, None)
        else:
            self.compute_domains[key] = domain
        outcome = Outcome()
        for _, (pod, _) in sorted(self._pending.items(), key=lambda item: item[0]):
            entries = pod.spec.resource_claims
            if pod.metadata.namespace == namespace and any(e.resource_claim_template_name == template for e in entries):
                outcome.extend(self._observe(pod, now, force=True))
        return self._flush(outcome, now, force=False)

    def _in_domains(self, event: PendingPodEvent) -> PendingPodEvent:
        """The pod's claims made from a ComputeDomain's channel template name the domain."""
        if not any(c.template for c in event.claims):
            return event
        claims = tuple(
            msgspec.structs.replace(c, compute_domain=self.compute_domains.get(f"{event.namespace}/{c.template}", ""))
            if c.template
            else c
            for c in event.claims
        )
        return msgspec.structs.replace(event, claims=claims)

    # --- Volcano PodGroups: they only feed the gangs ---

    def podgroup_observed(self, group: PodGroup, now: float) -> Outcome:
        policy, problems = gangs.podgroup_policy(group)
        self.gangs.podgroup(tr.who(group.metadata), policy)
        return self._flush(Outcome(problems=problems), now, force=False)

    def podgroup_gone(self, key: str, now: float) -> Outcome:
        self.gangs.podgroup_gone(key)
        return self._flush(Outcome(), now, force=False)

    def podgroups_relisted(self, groups: list[PodGroup], now: float) -> Outcome:
        outcome = Outcome()
        policies: dict[str, gangs.GangPolicy] = {}
        for group in groups:
            policy, problems = gangs.podgroup_policy(group)
            policies[tr.who(group.metadata)] = policy
            outcome.problems.extend(problems)
        self.gangs.podgroups_relisted(policies)
        return self._flush(outcome, now, force=False)

    # --- the steps ---

    def _observe(self, pod: Pod, now: float, *, force: bool) -> Outcome:
        meta = pod.metadata
        uid = meta.uid
        if tr.is_finished(pod):
            return self._gone(uid, now)  # a finished pod's devices are free
        ours = tr.is_ours(pod, self.scheduler_name)
        membership, link_problems = gangs.membership_read(pod)
        known = self._known.get(uid)
        if tr.is_pending(pod):
            if not ours or tr.is_gated(pod):
                return Outcome()  # another scheduler's business, or not ready to be scheduled
            claims = tuple(c.claim_name for c in tr.claim_refs(pod))
            published = self._pending.get(uid)
            relabelled = published is not None and published[0].metadata.labels != meta.labels
            if known is not None and known.bound is None and not force and known.claims == claims and not relabelled:
                # annotations written before binding change nothing; a template's claim being made does, and
                # so do labels (running pods' anti-affinity and the spread selectors read them)
                return Outcome()
            pending, problems = tr.pending_event(pod, now, gang_member=membership is not None, selectors=self.selectors)
            pending = self._in_domains(pending)
            problems += link_problems
            self._pending[uid] = (pod, pending.default_spread_selector)
            gang = membership.gang if membership is not None else ""
            self._known[uid] = _KnownPod(
                namespace=meta.namespace,
                name=meta.name,
                ours=True,
                gang=gang,
                claims=claims,
                pending=pending if claims and membership is None else None,
            )
            if membership is None:
                publication = Publication(topic=topics.PODS_PENDING.name, key=uid, event=pending)
                return Outcome(publications=[publication], problems=problems)
            policy = None
            if membership.source is gangs.GangSource.KUEUE:
                policy, policy_problems = gangs.kueue_policy(pod)
                problems += policy_problems
            self.gangs.pending(membership, pending, policy)
            return Outcome(problems=problems)
        self._pending.pop(uid, None)
        gang = membership.gang if membership is not None else ""
        bound, problems = tr.bound_event(pod, now, ours=ours, gang=gang, key=self.decision_key)
        if ours and membership is not None:
            running = RunningMember(uid=uid, name=meta.name, node=bound.node)
            self.gangs.running(membership, meta.namespace, running)
        digest = _digest(bound)
        if known is not None and known.bound == digest and not force:
            return Outcome()
        self._known[uid] = _KnownPod(
            namespace=meta.namespace, name=meta.name, ours=ours, gang=gang, node=bound.node, bound=digest
        )
        return Outcome(
            publications=[Publication(topic=topics.PODS_LIFECYCLE.name, key=uid, event=bound)], problems=problems
        )

    def _gone(self, uid: str, now: float) -> Outcome:
        self._pending.pop(uid, None)
        known = self._known.pop(uid, None)
        if known is None:
            return Outcome()
        if known.gang:
            self.gangs.gone(known.gang, uid)
        event = tr.deleted_event(uid, known.namespace, known.name, known.node, now, ours=known.ours, gang=known.gang)
        return Outcome(publications=[Publication(topic=topics.PODS_LIFECYCLE.name, key=uid, event=event)])

    def gangs_changed(self, outcome: Outcome, now: float) -> Outcome:
        """After a change of the gangs' group objects (kai.py, workload_api.py): the gangs it changed."""
        return self._flush(outcome, now, force=False)

    def _flush(self, outcome: Outcome, now: float, *, force: bool) -> Outcome:
        for gang in self.gangs.flush(now, force=force):
            outcome.publications.append(Publication(topic=topics.GANGS_PENDING.name, key=gang.name, event=gang))
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
        mine: Callable[[str], bool] = lambda _key: True,
    ) -> None:
        """`mine`: the keys of its topic it answers for (where two kinds share one topic)."""
        self._mine = mine
        self._translate = translate
        self._key_of = key_of
        self._on_gone = on_gone
        self._topic = topic
        self._last: dict[str, E] = {}

    def __len__(self) -> int:
        return len(self._last)

    def seed(self, events: dict[str, E]) -> None:
        self._last.update((key, event) for key, event in events.items() if self._mine(key))

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
    def on_gone(name: str, last: NodeStatusEvent, now: float) -> list[Publication]:
        return [Publication(topic=topics.NODES_STATUS.name, key=name, event=tr.node_deleted_event(name, now))]

    return KeyedTracker(tr.node_status_event, lambda n: n.metadata.name, on_gone, topics.NODES_STATUS.name)


def hypernode_tracker() -> KeyedTracker[HyperNode, HyperNodeEvent]:
    def on_gone(name: str, last: HyperNodeEvent, now: float) -> list[Publication]:
        # the deleted event tells live readers; the tombstone lets compaction drop the key
        deleted = network.hypernode_deleted_event(name, last.tier, now)
        return [
            Publication(topic=topics.TOPOLOGY_NETWORK.name, key=name, event=deleted),
            Publication(topic=topics.TOPOLOGY_NETWORK.name, key=name, event=None),
        ]

    return KeyedTracker(network.hypernode_event, lambda h: h.metadata.name, on_gone, topics.TOPOLOGY_NETWORK.name)


def topology_tracker() -> KeyedTracker[Topology, TopologyLevelsEvent]:
    def on_gone(name: str, last: TopologyLevelsEvent, now: float) -> list[Publication]:
        deleted = network.topology_deleted_event(name, now)
        return [
            Publication(topic=topics.TOPOLOGY_LEVELS.name, key=name, event=deleted),
            Publication(topic=topics.TOPOLOGY_LEVELS.name, key=name, event=None),
        ]

    # a Kueue Topology's name has no "/": the keys with one are KAI Topologies' (kai_topologies.py)
    return KeyedTracker(
        network.topology_levels_event,
        lambda t: t.metadata.name,
        on_gone,
        topics.TOPOLOGY_LEVELS.name,
        mine=lambda name: "/" not in name,
    )
