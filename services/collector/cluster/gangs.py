"""Gangs: which pods belong together, what their group asks, and when a gang is ready to go out. Pure.

A pod of ours belongs to a gang when it names one:
- Volcano: the annotation `scheduling.k8s.io/group-name` (or the label
  `pod-group.scheduling.sigs.k8s.io`) names a PodGroup
  (scheduling.volcano.sh/v1beta1) in the pod's namespace, which gives
  minMember, networkTopology and subGroupPolicy. Until that PodGroup is seen
  the gang waits, as Volcano's scheduler does.
- Kueue: the label (or annotation) `kueue.x-k8s.io/pod-group-name`, with
  `kueue.x-k8s.io/pod-group-total-count` as the gang's minimum and the
  PodSet topology annotations as its network constraint.
- Kubernetes' Workload API (`scheduling.k8s.io`): `spec.schedulingGroup.podGroupName`
  names a PodGroup (v1alpha2 / v1beta1), `spec.workloadRef` a v1alpha1
  Workload's pod group (workload_api.py gives their policies).
- KAI: the annotation `pod-group-name` names a PodGroup (`scheduling.run.ai`,
  kai.py gives its policy).
A pod is read in that order: the Workload API, KAI, Volcano, Kueue.

The GangTracker holds each gang's pending members (their events) and running
members (uid, name, node) and publishes the gang once pending + running reach
the minimum, again whenever the set of pending members (or the group's policy)
changes, and at every resync while members are pending.
"""

from __future__ import annotations

import enum

import msgspec

from schemas.dra import PodClaim
from schemas.errors import FieldError
from schemas.events import (
    GangRef,
    NetworkConstraint,
    PendingGangEvent,
    PendingPodEvent,
    RunningMember,
    SubGroupPolicy,
    TopologyMode,
)
from schemas.gangs_kai import KAI_GROUP_ANNOTATION
from services.collector.cluster import objects as obj
from services.collector.cluster.pending_fields import bounded
from services.collector.cluster.translate import Problem, label_selector, who
from topoplace.cluster_objects.gangs import link_of

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
KUEUE_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"  # a label in Kueue; an annotation is read too
KUEUE_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KUEUE_SLICE_POLICY = "slice"  # the name of the subgroup policy a Kueue slice becomes


class GangSource(enum.StrEnum):
    PODGROUP = "podgroup"  # Volcano
    KUEUE = "kueue"
    KUBE = "scheduling.k8s.io"  # a PodGroup, or a v1alpha1 Workload's pod group
    KAI = "kai"


class Membership(msgspec.Struct, frozen=True, kw_only=True):
    gang: str  # "<namespace>/<group>"
    source: GangSource
    policy: str = ""  # where its policy is filed among its source's ("": under the gang's name)

    @property
    def policy_key(self) -> str:
        return self.policy or self.gang


class GangPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """What the group asks of its members as a whole."""

    min_member: int = 1
    network: NetworkConstraint | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()


def membership_of(pod: obj.Pod) -> Membership | None:
    return membership_read(pod)[0]


def membership_read(pod: obj.Pod) -> tuple[Membership | None, list[Problem]]:
    """The gang the pod joins (module docstring), and what of its link cannot be read."""
    meta = pod.metadata
    try:
        link = link_of(pod.spec.scheduling_group, pod.spec.workload_ref)
    except FieldError as exc:
        return None, [Problem(object=who(meta), field=exc.field, reason=f"{exc.reason}; not a gang member")]
    if link is not None:
        # a v1alpha1 pod group's policy is its Workload's template's, whatever the replica
        policy = f"{meta.namespace}/{link.workload}:{link.workload_group}" if link.workload else ""
        return Membership(gang=f"{meta.namespace}/{link.group_name}", source=GangSource.KUBE, policy=policy), []
    if group := meta.annotations.get(KAI_GROUP_ANNOTATION):
        return Membership(gang=f"{meta.namespace}/{group}", source=GangSource.KAI), []
    return _volcano_or_kueue(meta), []


def _volcano_or_kueue(meta: obj.ObjectMeta) -> Membership | None:
    group = meta.annotations.get(VOLCANO_GROUP_ANNOTATION) or meta.labels.get(VOLCANO_GROUP_LABEL)
    if group:
        return Membership(gang=f"{meta.namespace}/{group}", source=GangSource.PODGROUP)
    group = meta.labels.get(KUEUE_GROUP_NAME) or meta.annotations.get(KUEUE_GROUP_NAME)
    if group:
        return Membership(gang=f"{meta.namespace}/{group}", source=GangSource.KUEUE)
    return None


# --- policies ---------------------------------------------------------------------------------


def _positive(text: str | None, where: str, field: str, problems: list[Problem]) -> int | None:
    if text is None:
        return None
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        problems.append(Problem(object=where, field=field, reason=f"{text!r} is not a positive integer"))
        return None
    return number


def network_constraint(
    spec: obj.NetworkTopologySpec, where: str, field: str, problems: list[Problem]
) -> NetworkConstraint:
    try:
        mode = TopologyMode(spec.mode or TopologyMode.HARD)
    except ValueError:
        problems.append(Problem(object=where, field=f"{field}.mode", reason=f"{spec.mode!r} is not hard or soft; hard"))
        mode = TopologyMode.HARD
    tier = spec.highest_tier_allowed
    if tier is not None and tier < 0:
        problems.append(Problem(object=where, field=f"{field}.highestTierAllowed", reason=f"{tier} is negative"))
        tier = None
    return NetworkConstraint(mode=mode, highest_tier=tier, highest_tier_name=spec.highest_tier_name)


def podgroup_policy(group: obj.PodGroup) -> tuple[GangPolicy, list[Problem]]:
    """A Volcano PodGroup's minMember (at least 1), networkTopology and subGroupPolicy."""
    where = who(group.metadata)
    problems: list[Problem] = []
    spec = group.spec
    network = None
    if spec.network_topology is not None:
        network = network_constraint(spec.network_topology, where, "spec.networkTopology", problems)
    sub_groups = []
    for i, sub in enumerate(spec.sub_group_policy):
        field = f"spec.subGroupPolicy[{i}]"
        sub_network = None
        if sub.network_topology is not None:
            sub_network = network_constraint(sub.network_topology, where, f"{field}.networkTopology", problems)
        sub_groups.append(
            SubGroupPolicy(
                name=sub.name,
                sub_group_size=max(sub.sub_group_size or 0, 0),
                min_sub_groups=max(sub.min_sub_groups or 0, 0),
                match_label_keys=tuple(sub.match_label_keys),
                label_selector=label_selector(sub.label_selector) if sub.label_selector is not None else None,
                network=sub_network,
            )
        )
    policy = GangPolicy(min_member=max(spec.min_member, 1), network=network, sub_groups=tuple(sub_groups))
    return policy, problems


def kueue_policy(pod: obj.Pod) -> tuple[GangPolicy, list[Problem]]:
    """The gang's minimum and topology requests, from the annotations Kueue reads on each pod of a group."""
    meta = pod.metadata
    where = who(meta)
    problems: list[Problem] = []
    notes = meta.annotations
    total = notes.get(KUEUE_TOTAL_COUNT)
    min_member = _positive(total, where, f"metadata.annotations[{KUEUE_TOTAL_COUNT}]", problems)
    if total is None:
        reason = "missing on a pod of a Kueue pod group; the gang's minimum is 1"
        problems.append(Problem(object=where, field=f"metadata.annotations[{KUEUE_TOTAL_COUNT}]", reason=reason))
    network = None
    if level := notes.get(KUEUE_REQUIRED_TOPOLOGY):
        network = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=level)
    elif level := notes.get(KUEUE_PREFERRED_TOPOLOGY):
        network = NetworkConstraint(mode=TopologyMode.SOFT, highest_tier_name=level)
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    if level := notes.get(KUEUE_SLICE_REQUIRED_TOPOLOGY):
        field = f"metadata.annotations[{KUEUE_SLICE_SIZE}]"
        size = _positive(notes.get(KUEUE_SLICE_SIZE), where, field, problems)
        if KUEUE_SLICE_SIZE not in notes:
            problems.append(Problem(object=where, field=field, reason=f"required with {KUEUE_SLICE_REQUIRED_TOPOLOGY}"))
        if size is not None:
            slice_network = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=level)
            sub_groups = (SubGroupPolicy(name=KUEUE_SLICE_POLICY, sub_group_size=size, network=slice_network),)
    return GangPolicy(min_member=min_member or 1, network=network, sub_groups=sub_groups), problems


# --- the tracker ------------------------------------------------------------------------------


class _Gang:
    __slots__ = ("namespace", "pending", "policy", "policy_key", "published", "running", "source")

    def __init__(self, namespace: str, membership: Membership) -> None:
        self.namespace = namespace
        self.source = membership.source
        self.policy_key = membership.policy_key
        self.pending: dict[str, PendingPodEvent] = {}
        self.running: dict[str, RunningMember] = {}
        self.policy: GangPolicy | None = None  # Kueue: from the pods; the others: from their group objects
        # what was published: the pending members with their claims' references, and the policy
        self.published: tuple[frozenset[tuple[str, tuple[PodClaim, ...]]], GangPolicy] | None = None


class GangTracker:
    """Gang members and their groups' policies in; PendingGangEvents out (`flush`).

    A policy is filed by its source and key: Volcano's, KAI's and scheduling.k8s.io PodGroups under
    "<namespace>/<name>", a v1alpha1 Workload's pod group under "<namespace>/<workload>:<group>".
    """

    def __init__(self) -> None:
        self._gangs: dict[str, _Gang] = {}
        self._podgroups: dict[tuple[GangSource, str], GangPolicy] = {}
        self._gangs_of: dict[tuple[GangSource, str], set[str]] = {}  # a policy -> the gangs it governs
        self._dirty: set[str] = set()

    def __len__(self) -> int:
        return len(self._gangs)

    def _gang(self, membership: Membership, namespace: str) -> _Gang:
        gang = self._gangs.get(membership.gang)
        if gang is None or gang.source is not membership.source or gang.policy_key != membership.policy_key:
            if gang is not None:
                self._forget(membership.gang, gang)
            gang = self._gangs[membership.gang] = _Gang(namespace, membership)
            self._gangs_of.setdefault((gang.source, gang.policy_key), set()).add(membership.gang)
        self._dirty.add(membership.gang)
        return gang

    def pending(self, membership: Membership, event: PendingPodEvent, policy: GangPolicy | None = None) -> None:
        """A pending member (again: its newest event replaces the last); `policy` for a Kueue group."""
        gang = self._gang(membership, event.namespace)
        gang.running.pop(event.uid, None)
        gang.pending[event.uid] = event
        if policy is not None:
            gang.policy = policy

    def running(self, membership: Membership, namespace: str, member: RunningMember) -> None:
        known = self._gangs.get(membership.gang)
        if known is not None and known.running.get(member.uid) == member:
            return
        gang = self._gang(membership, namespace)
        gang.pending.pop(member.uid, None)
        gang.running[member.uid] = member

    def again(self, name: str) -> None:
        """Publish the gang again at the next flush (one of its members' claims appeared)."""
        gang = self._gangs.get(name)
        if gang is not None:
            gang.published = None
            self._dirty.add(name)

    def gone(self, name: str, uid: str) -> None:
        gang = self._gangs.get(name)
        if gang is None:
            return
        if gang.pending.pop(uid, None) is not None or gang.running.pop(uid, None) is not None:
            self._dirty.add(name)
        if not gang.pending and not gang.running:
            del self._gangs[name]
            self._forget(name, gang)
            self._dirty.discard(name)

    def _forget(self, name: str, gang: _Gang) -> None:
        governed = self._gangs_of.get((gang.source, gang.policy_key))
        if governed is not None:
            governed.discard(name)
            if not governed:
                del self._gangs_of[(gang.source, gang.policy_key)]

    def _changed(self, source: GangSource, key: str) -> None:
        self._dirty.update(self._gangs_of.get((source, key), ()))

    def podgroup(self, key: str, policy: GangPolicy, source: GangSource = GangSource.PODGROUP) -> None:
        if self._podgroups.get((source, key)) != policy:
            self._podgroups[(source, key)] = policy
            self._changed(source, key)

    def podgroup_gone(self, key: str, source: GangSource = GangSource.PODGROUP) -> None:
        if self._podgroups.pop((source, key), None) is not None:
            self._changed(source, key)

    def podgroups_relisted(self, policies: dict[str, GangPolicy], source: GangSource = GangSource.PODGROUP) -> None:
        """Every policy of one source: the ones not given are gone."""
        for known_source, key in [k for k in self._podgroups if k[0] is source and k[1] not in policies]:
            self.podgroup_gone(key, known_source)
        for key, policy in policies.items():
            self.podgroup(key, policy, source)

    def flush(self, now: float, *, force: bool = False) -> list[PendingGangEvent]:
        """The gangs to publish now: changed ones, or with `force` every one with pending members."""
        names = sorted(self._gangs) if force else sorted(n for n in self._dirty if n in self._gangs)
        self._dirty.clear()
        events: list[PendingGangEvent] = []
        for name in names:
            gang = self._gangs[name]
            policy = (
                gang.policy if gang.source is GangSource.KUEUE else self._podgroups.get((gang.source, gang.policy_key))
            )
            if policy is None or not gang.pending or len(gang.pending) + len(gang.running) < policy.min_member:
                gang.published = None  # waiting: for its PodGroup, or for more members
                continue
            # a member's claim made from its template, or its ComputeDomain seen, changes the gang
            published = (frozenset((uid, m.claims) for uid, m in gang.pending.items()), policy)
            if published == gang.published and not force:
                continue
            gang.published = published
            events.append(self._event(name, gang, policy, now))
        return events

    @staticmethod
    def _event(name: str, gang: _Gang, policy: GangPolicy, now: float) -> PendingGangEvent:
        ref = GangRef(name=name, min_member=policy.min_member)
        # A member over its bound goes out reduced, with the reason (the placer reports the gang).
        members = [
            bounded(msgspec.structs.replace(m, gang=ref))[0]
            for m in sorted(gang.pending.values(), key=lambda e: e.name)
        ]
        return PendingGangEvent(
            name=name,
            namespace=gang.namespace,
            min_member=policy.min_member,
            network=policy.network,
            sub_groups=policy.sub_groups,
            members=tuple(members),
            running=tuple(sorted(gang.running.values(), key=lambda r: r.name)),
            source=gang.source.value,
            observed_at=now,
        )
