"""KAI PodGroups (`scheduling.run.ai`): each one's gang policy, read as `engine place --cluster` reads it.

The PodGroup is decoded into schemas.gangs_kai.KaiPodGroup, the Struct the command decodes, and its
policy is schemas.gangs_kai.kai_policy's: `spec.minMember`, the topology constraint
(`spec.topologyConstraint`, else the placement annotations on the PodGroup), and every subgroup as
a nested subgroup policy (a leaf takes the members labelled `kai.scheduler/subgroup-name` with its
name). Its members join by the pod annotation `pod-group-name` (gangs.py). Not read here: the
placement and segment annotations found on the pods alone (the command reads them from the gang's
first pod); KAI's pod-grouper writes them onto the PodGroup.

A PodGroup that cannot be read is reported (field and reason) and its gang waits, as for a
PodGroup not seen yet; the watch goes on.
"""

from __future__ import annotations

from schemas.errors import FieldError
from schemas.gangs_kai import KaiPodGroup, kai_policy
from services.collector.cluster.gangs import GangPolicy, GangSource
from services.collector.cluster.trackers import Outcome, PodTracker
from services.collector.cluster.translate import Problem

KAI_GROUP, KAI_PODGROUPS = "scheduling.run.ai", "podgroups"
KAI_VERSIONS = ("v2alpha2",)  # the first one served is watched


def podgroup_key(group: KaiPodGroup) -> str:
    return f"{group.metadata.namespace}/{group.metadata.name}"


def kai_gang_policy(group: KaiPodGroup) -> tuple[GangPolicy | None, list[Problem]]:
    """The PodGroup's policy, or None and the field that cannot be read."""
    try:
        network, sub_groups = kai_policy(group, {})
    except FieldError as exc:
        reason = f"{exc.reason}; the KAI PodGroup is skipped (its gang waits)"
        return None, [Problem(object=f"PodGroup {podgroup_key(group)} ({KAI_GROUP})", field=exc.field, reason=reason)]
    return GangPolicy(min_member=group.spec.min_member, network=network, sub_groups=sub_groups), []


class KaiPodGroupsOfPods:
    """KAI PodGroups feed the pods' gangs (as Volcano's do: pod_feeds.PodGroupsOfPods)."""

    def __init__(self, pods: PodTracker) -> None:
        self._pods = pods

    def relisted(self, objs: list[KaiPodGroup], now: float, *, force: bool = False) -> Outcome:
        policies: dict[str, GangPolicy] = {}
        problems: list[Problem] = []
        for group in objs:
            policy, found = kai_gang_policy(group)
            problems += found
            if policy is not None:
                policies[podgroup_key(group)] = policy
        self._pods.gangs.podgroups_relisted(policies, GangSource.KAI)
        return self._pods.gangs_changed(Outcome(problems=problems), now)

    def observe(self, obj: KaiPodGroup, now: float) -> Outcome:
        policy, problems = kai_gang_policy(obj)
        if policy is None:
            self._pods.gangs.podgroup_gone(podgroup_key(obj), GangSource.KAI)
        else:
            self._pods.gangs.podgroup(podgroup_key(obj), policy, GangSource.KAI)
        return self._pods.gangs_changed(Outcome(problems=problems), now)

    def gone(self, key: str, now: float) -> Outcome:
        self._pods.gangs.podgroup_gone(key, GangSource.KAI)
        return self._pods.gangs_changed(Outcome(), now)
