"""Kubernetes' Workload API (`scheduling.k8s.io`): each gang's policy, read as `engine place --cluster`
reads it (schemas.gangs_kube: the same Structs, `kube_policy`, `resolved`, `from_template`).

- A PodGroup (v1beta1 / v1alpha2) gives the policy of the gang of its name, which pods join by
  `spec.schedulingGroup.podGroupName`: its `schedulingPolicy` (gang: `minCount`; basic: 1) and
  `schedulingConstraints.topology` (hard, named by the node label), what it leaves out taken from
  its Workload's template (`spec.podGroupTemplateRef.workload`).
- A v1alpha1 Workload gives the policy of each of its `podGroups`, for the pods whose
  `spec.workloadRef` names it (one gang per `podGroupReplicaKey`, each with that policy).

The first version the cluster serves is watched (Workloads: v1beta1, v1alpha2, v1alpha1). The
policies are worked out again from both kinds whenever one changes (a PodGroup reads its Workload's
template). One that cannot be read is reported (field and reason) and its gang waits, as for a
PodGroup not seen yet; the watch goes on. Not read: PodGroup `resourceClaims` (KEP-5729).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from schemas.errors import FieldError
from schemas.gangs_kube import KUBE_SCHEDULING_GROUP, KubePodGroup, Workload, from_template, kube_policy, resolved
from services.collector.cluster.gangs import GangPolicy, GangSource
from services.collector.cluster.trackers import Outcome, PodTracker
from services.collector.cluster.translate import Problem

WORKLOADS, KUBE_PODGROUPS = "workloads", "podgroups"
WORKLOAD_VERSIONS = ("v1beta1", "v1alpha2", "v1alpha1")
PODGROUP_VERSIONS = ("v1beta1", "v1alpha2")

T = TypeVar("T", Workload, KubePodGroup)


def object_key(obj: Workload | KubePodGroup) -> str:
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def _policy(group: KubePodGroup) -> GangPolicy:
    minimum, network = kube_policy(group)
    return GangPolicy(min_member=minimum, network=network)


def _problem(kind: str, key: str, exc: FieldError) -> Problem:
    reason = f"{exc.reason}; the {kind} is skipped (its gang waits)"
    return Problem(object=f"{kind} {key} ({KUBE_SCHEDULING_GROUP})", field=exc.field, reason=reason)


class WorkloadApiGangs:
    """The Workloads and PodGroups seen, and the gangs' policies from them; `workloads` and
    `podgroups` are the trackers of the two watched kinds."""

    def __init__(self, pods: PodTracker) -> None:
        self._pods = pods
        self._workloads: dict[str, Workload] = {}
        self._groups: dict[str, KubePodGroup] = {}
        self.workloads = _KindOf(self, self._workloads, "Workload")
        self.podgroups = _KindOf(self, self._groups, "PodGroup")

    def policies(self) -> tuple[dict[str, GangPolicy], dict[tuple[str, str], list[Problem]]]:
        """Every gang policy by its key (gangs.GangTracker), and the problems by (kind, object)."""
        policies: dict[str, GangPolicy] = {}
        problems: dict[tuple[str, str], list[Problem]] = {}
        for key, group in self._groups.items():
            ref = group.spec.pod_group_template_ref
            named = f"{group.metadata.namespace}/{ref.workload.workload_name}" if ref and ref.workload else ""
            try:
                policies[key] = _policy(resolved(group, self._workloads.get(named)))
            except FieldError as exc:
                problems.setdefault(("PodGroup", key), []).append(_problem("PodGroup", key, exc))
        for key, workload in self._workloads.items():
            for i, template in enumerate(workload.spec.pod_groups):
                try:
                    policies[f"{key}:{template.name}"] = _policy(from_template(workload, template))
                except FieldError as exc:
                    field = FieldError(f"spec.podGroups[{i}].{exc.field.removeprefix('spec.')}", exc.reason)
                    problems.setdefault(("Workload", key), []).append(_problem("Workload", key, field))
        return policies, problems

    def changed(self, now: float, report: tuple[str, str] | None) -> Outcome:
        """Policies worked out again; the problems of `report` (every one: None) are reported."""
        policies, problems = self.policies()
        self._pods.gangs.podgroups_relisted(policies, GangSource.KUBE)
        found = [p for at, listed in sorted(problems.items()) if report in (None, at) for p in listed]
        return self._pods.gangs_changed(Outcome(problems=found), now)


class _KindOf(Generic[T]):
    """One of the two kinds, as the watcher's tracker of it."""

    def __init__(self, gangs: WorkloadApiGangs, seen: dict[str, T], kind: str) -> None:
        self._gangs = gangs
        self._seen: dict[str, T] = seen
        self._kind = kind

    def relisted(self, objs: list[T], now: float, *, force: bool = False) -> Outcome:
        self._seen.clear()
        self._seen.update((object_key(o), o) for o in objs)
        return self._gangs.changed(now, None)

    def observe(self, obj: T, now: float) -> Outcome:
        self._seen[object_key(obj)] = obj
        return self._gangs.changed(now, (self._kind, object_key(obj)))

    def gone(self, key: str, now: float) -> Outcome:
        self._seen.pop(key, None)
        return self._gangs.changed(now, ("", ""))
