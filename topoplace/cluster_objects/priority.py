"""Priority and disruption: PriorityClasses, PodDisruptionBudgets, and what preemption reads of a Pod.

A pod's priority is `spec.priority` where the object has it (the API server's
admission wrote it); otherwise resolved as that admission does: its
`priorityClassName`'s value (a class no file holds is bad input, as admission
refuses the pod), else the value of the globalDefault class (the highest, if
several say so), else 0. `preemptionPolicy` likewise: the pod's, else its
class's, else PreemptLowerPriority.

A PodDisruptionBudget allows `status.disruptionsAllowed` more disruptions, as
kube-scheduler reads it. A budget written without a status (a what-if) gets
the disruption controller's count over the running pods it selects, all
counted healthy and expected: `minAvailable` (a number, or a percentage
rounded up) leaves that many, `maxUnavailable` allows that many.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TypeVar

import msgspec

from engine.core.model import PodRequest
from engine.decide.preempt import DEFAULT_PRIORITY, PREEMPT_LOWER_PRIORITY, DisruptionBudget, Preemptor, RunningPod
from engine.decide.preempt.budgets import selects
from schemas.errors import FieldError
from schemas.events.network import LabelSelector, LabelSelectorRequirement
from schemas.gangs import VOLCANO_GROUP_ANNOTATION, kueue_group
from schemas.kube import HostPort
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


class _Meta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class _Condition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""
    reason: str = ""


class _PodSpec(msgspec.Struct, kw_only=True, rename="camel"):
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None


class _PodStatus(msgspec.Struct, kw_only=True, rename="camel"):
    start_time: str | None = None
    nominated_node_name: str = ""
    conditions: list[_Condition] = []


class _Pod(msgspec.Struct, kw_only=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)
    status: _PodStatus = msgspec.field(default_factory=_PodStatus)


class PriorityClass(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    metadata: _Meta
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None


class _Requirement(msgspec.Struct, kw_only=True):
    key: str
    operator: str
    values: list[str] = []


class _Selector(msgspec.Struct, kw_only=True, rename="camel"):
    match_labels: dict[str, str] = {}
    match_expressions: list[_Requirement] = []


class _BudgetSpec(msgspec.Struct, kw_only=True, rename="camel"):
    selector: _Selector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class _BudgetStatus(msgspec.Struct, kw_only=True, rename="camel"):
    disruptions_allowed: int | None = None
    disrupted_pods: dict[str, str] = {}


class _Budget(msgspec.Struct, kw_only=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _BudgetSpec = msgspec.field(default_factory=_BudgetSpec)
    status: _BudgetStatus | None = None


T = TypeVar("T")


def _decoded(item: ClusterObject, kind: type[T]) -> T:
    try:
        return msgspec.convert(item.body, kind)
    except msgspec.ValidationError as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


def priority_class(item: ClusterObject) -> PriorityClass:
    found = _decoded(item, PriorityClass)
    if not found.metadata.name:
        raise ClusterInputError(item.where, "metadata.name", "a PriorityClass needs a name")
    return found


class Priorities:
    """The cluster's PriorityClasses, resolving a pod's priority and preemption policy as admission does."""

    def __init__(self, classes: Sequence[PriorityClass]) -> None:
        self.by_name = {c.metadata.name: c for c in classes}
        defaults = [c for c in classes if c.global_default]
        self.default = max(defaults, key=lambda c: (c.value, c.metadata.name)) if defaults else None

    def of(self, item: ClusterObject, pod: _Pod) -> tuple[int, str]:
        """(priority, preemptionPolicy) of the pod. Raises ClusterInputError for a class no file holds."""
        name = pod.spec.priority_class_name
        cls = self.by_name.get(name) if name else self.default
        if name and cls is None:
            raise ClusterInputError(item.where, "spec.priorityClassName", f"no PriorityClass {name!r} in the cluster")
        priority = pod.spec.priority if pod.spec.priority is not None else cls.value if cls else DEFAULT_PRIORITY
        policy = pod.spec.preemption_policy or (cls.preemption_policy if cls else None) or PREEMPT_LOWER_PRIORITY
        return priority, policy


def _seconds(item: ClusterObject, text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ClusterInputError(item.where, "status.startTime", f"not an RFC 3339 time: {text!r}") from None


def _terminating_by_preemption(pod: _Pod) -> bool:
    """kube's podTerminatingByPreemption: being deleted, with DisruptionTarget True for PreemptionByScheduler."""
    if pod.metadata.deletion_timestamp is None:
        return False
    for condition in pod.status.conditions:
        if condition.type == DISRUPTION_TARGET:
            return condition.status == "True" and condition.reason == PREEMPTION_BY_SCHEDULER
    return False


def running_for_preemption(item: ClusterObject, priorities: Priorities, node: str, holder: str,
                           requests: Mapping[str, str], host_ports: tuple[HostPort, ...]) -> RunningPod:  # fmt: skip
    """A bound pod as preemption weighs it. Raises ClusterInputError."""
    pod = _decoded(item, _Pod)
    priority, _ = priorities.of(item, pod)
    gang, least = _gang_of(item, pod)
    return RunningPod(
        namespace=pod.metadata.namespace or "default",
        name=pod.metadata.name,
        node=node,
        holder=holder,
        priority=priority,
        start_time=_seconds(item, pod.status.start_time),
        labels=dict(pod.metadata.labels),
        requests=dict(requests),
        host_ports=host_ports,
        terminating_by_preemption=_terminating_by_preemption(pod),
        gang=gang,
        gang_min_member=least,
    )


def _gang_of(item: ClusterObject, pod: _Pod) -> tuple[str, int]:
    """(namespace/name of its pod group, the group's minimum) or ("", 0): a Volcano group's minimum is
    its PodGroup's minMember (1 here, set from the PodGroup by who reads it), a Kueue group's its total."""
    namespace, annotations = pod.metadata.namespace or "default", pod.metadata.annotations
    volcano = annotations.get(VOLCANO_GROUP_ANNOTATION)
    if volcano:
        return f"{namespace}/{volcano}", 1
    try:
        kueue = kueue_group(annotations)
    except FieldError as exc:
        raise ClusterInputError(item.where, exc.field, exc.reason) from None
    return (f"{namespace}/{kueue[0]}", kueue[1]) if kueue is not None else ("", 0)


def nomination(item: ClusterObject) -> str:
    """The pod's status.nominatedNodeName ("" when it has none)."""
    return _decoded(item, _Pod).status.nominated_node_name


def preemptor_of(item: ClusterObject, request: PodRequest, priorities: Priorities) -> Preemptor:
    """The pod to place as a preemptor: its priority, preemption policy and nomination."""
    pod = _decoded(item, _Pod)
    priority, policy = priorities.of(item, pod)
    return Preemptor(request=request, priority=priority, policy=policy, nominated_node=pod.status.nominated_node_name)


def _scaled(item: ClusterObject, field: str, value: int | str, expected: int) -> int:
    if isinstance(value, int):
        return value
    if not value.endswith("%") or not value[:-1].isdigit():
        raise ClusterInputError(item.where, field, f"expected a number or a percentage, got {value!r}")
    return math.ceil(expected * int(value[:-1]) / 100)


def budget(item: ClusterObject, running: Sequence[RunningPod]) -> DisruptionBudget:
    """A PodDisruptionBudget (its status's disruptionsAllowed, or the controller's count). ClusterInputError."""
    found = _decoded(item, _Budget)
    namespace = found.metadata.namespace or "default"
    spec = found.spec
    selector = None
    if spec.selector is not None:
        selector = LabelSelector(
            match_labels=dict(spec.selector.match_labels),
            match_expressions=tuple(
                LabelSelectorRequirement(key=r.key, operator=r.operator, values=tuple(r.values))
                for r in spec.selector.match_expressions
            ),
        )
    status = found.status
    if status is not None and status.disruptions_allowed is not None:
        allowed = status.disruptions_allowed
    else:
        healthy = sum(1 for p in running if p.namespace == namespace and selects(selector, p.labels))
        if spec.min_available is not None:
            allowed = healthy - _scaled(item, "spec.minAvailable", spec.min_available, healthy)
        elif spec.max_unavailable is not None:
            allowed = _scaled(item, "spec.maxUnavailable", spec.max_unavailable, healthy)
        else:
            raise ClusterInputError(item.where, "spec", "a PodDisruptionBudget needs minAvailable or maxUnavailable")
    return DisruptionBudget(
        namespace=namespace,
        name=found.metadata.name,
        selector=selector,
        disruptions_allowed=max(allowed, 0),
        disrupted_pods=tuple(sorted(status.disrupted_pods)) if status is not None else (),
    )


def read_preemptor(paths: Sequence[str], request: PodRequest, priorities: Priorities) -> Preemptor:
    """The one Pod of `paths` (the pod to place, read as `request`) as a preemptor. ClusterInputError."""
    from topoplace.cluster_objects.files import read_objects

    item = next(item for path in paths for item in read_objects(path) if item.kind == "Pod")
    return preemptor_of(item, request, priorities)
