"""What preemption reads of a pod, added to its events: priority, preemption policy, nomination, start.

The API server's Priority admission wrote spec.priority and spec.preemptionPolicy on create,
so the pod carries them resolved; a pod from before admission (none) counts as priority 0.
"""

from __future__ import annotations

import datetime as dt

import msgspec

from schemas.events import PendingPodEvent, PodLifecycleEvent
from services.collector.cluster.objects import Pod

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def _seconds(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def terminating_by_preemption(pod: Pod) -> bool:
    """kube's podTerminatingByPreemption: being deleted, with DisruptionTarget True for PreemptionByScheduler."""
    if pod.metadata.deletion_timestamp is None:
        return False
    return any(
        c.type == DISRUPTION_TARGET and c.status == "True" and c.reason == PREEMPTION_BY_SCHEDULER
        for c in pod.status.conditions
    )


def pending(event: PendingPodEvent, pod: Pod) -> PendingPodEvent:
    """The pending pod's event with its preemption policy and nomination."""
    return msgspec.structs.replace(
        event,
        preemption_policy=pod.spec.preemption_policy or PREEMPT_LOWER_PRIORITY,
        nominated_node=pod.status.nominated_node_name,
    )


def running(event: PodLifecycleEvent, pod: Pod) -> PodLifecycleEvent:
    """The bound pod's event with what preemption weighs it by (priority, start, being evicted).

    Its labels, which budgets select by, are pod_topology's (within their bound)."""
    return msgspec.structs.replace(
        event,
        priority=pod.spec.priority or 0,
        started_at=_seconds(pod.status.start_time),
        terminating_by_preemption=terminating_by_preemption(pod),
    )
