"""Pure rules that turn what the API server said into a binding outcome.

Kept apart from the HTTP calls so every rule has a table test: how a status
code is treated, and what the pod we re-read means for a placement.
"""

from __future__ import annotations

import enum

import msgspec

from schemas.events import (
    BindingOutcome,
    DeviceAssignment,
    PlacementEvent,
    PlacementOutcome,
)
from schemas.shares import share_problem


class ApiErrorKind(enum.Enum):
    TRANSIENT = "transient"  # retry with backoff: the server is busy or failing
    CONFLICT = "conflict"  # 409: someone changed the pod first; re-read it to decide
    NOT_FOUND = "not_found"  # 404: the pod is gone
    REJECTED = "rejected"  # any other 4xx: retrying sends the same bad request again


def classify_status(status: int) -> ApiErrorKind:
    if status == 429 or status >= 500:
        return ApiErrorKind.TRANSIENT
    if status == 409:
        return ApiErrorKind.CONFLICT
    if status == 404:
        return ApiErrorKind.NOT_FOUND
    return ApiErrorKind.REJECTED


class BindResult(msgspec.Struct, frozen=True, kw_only=True):
    """How one pod's binding ended."""

    outcome: BindingOutcome
    reason: str = ""
    attempts: int = 1
    bound_now: bool = False  # this call created the Binding (not a pod found already bound)
    resource_version_changed: bool = False  # the pod changed since the placer saw it (informational)
    retryable: bool = False  # not bound for a while only (retries spent on faults, a lock held): worth another try
    condition: str = ""  # the PodScheduled=False reason the pod gets besides its Event ("": none)


class PodView(msgspec.Struct, frozen=True, kw_only=True):
    """The few fields of a pod the binder decides on."""

    uid: str
    node_name: str = ""
    resource_version: str = ""
    terminating: bool = False
    # The devices its seal proves (schemas/seal.py), never its annotations: None when none count.
    devices: tuple[DeviceAssignment, ...] | None = None
    seal_problem: str = ""  # why a bound pod's device annotation does not count ("" when it does or has none)
    phase: str = ""  # Pending, Running, Succeeded, Failed ("" when not known)
    requests: dict[str, int] = {}  # the pod's effective requests, milli-units
    scheduler_name: str = ""  # spec.schedulerName ("" when not known)
    priority: int = 0  # spec.priority (preemption: only lower-priority pods are evicted)
    nominated_node: str = ""  # status.nominatedNodeName
    grace_seconds: int | None = None  # spec.terminationGracePeriodSeconds (a victim is deleted with it)

    @property
    def finished(self) -> bool:
        """A pod that ended holds no devices any more, as kube-scheduler's cache counts it."""
        return self.phase in ("Succeeded", "Failed")


class PodStanding(enum.Enum):
    UNBOUND = "unbound"  # go ahead
    BOUND_HERE = "bound_here"  # already on the placement's node with its devices: done
    BOUND_ELSEWHERE = "bound_elsewhere"  # another node, or the same node with other devices
    REPLACED = "replaced"  # same name, another uid: the placement's pod was deleted
    TERMINATING = "terminating"
    MISSING = "missing"


class Judgement(msgspec.Struct, frozen=True, kw_only=True):
    standing: PodStanding
    reason: str = ""


def judge_pod(pod: PodView | None, placement: PlacementEvent) -> Judgement:
    pod_name = f"{placement.namespace}/{placement.name}"
    if pod is None:
        return Judgement(standing=PodStanding.MISSING, reason=f"pod {pod_name} deleted")
    if pod.uid != placement.uid:
        return Judgement(
            standing=PodStanding.REPLACED,
            reason=f"pod {pod_name} deleted (a new pod with uid {pod.uid} has its name)",
        )
    if pod.node_name:
        if pod.node_name != placement.node:
            return Judgement(
                standing=PodStanding.BOUND_ELSEWHERE,
                reason=f"pod {pod_name} is already bound to node {pod.node_name}",
            )
        held = pod.devices
        if held is not None and _device_set(held) != _device_set(placement.devices):
            return Judgement(
                standing=PodStanding.BOUND_ELSEWHERE,
                reason=f"pod {pod_name} is already bound to node {pod.node_name} with devices {describe_devices(held)}",
            )
        return Judgement(
            standing=PodStanding.BOUND_HERE, reason=f"pod {pod_name} already bound to node {pod.node_name}"
        )
    if pod.terminating:
        return Judgement(standing=PodStanding.TERMINATING, reason=f"pod {pod_name} is being deleted")
    return Judgement(standing=PodStanding.UNBOUND)


def outcome_of(standing: PodStanding) -> BindingOutcome | None:
    """The outcome a standing settles, or None when the binding should go ahead."""
    return {
        PodStanding.UNBOUND: None,
        PodStanding.BOUND_HERE: BindingOutcome.BOUND,
        PodStanding.BOUND_ELSEWHERE: BindingOutcome.CONFLICT,
        PodStanding.REPLACED: BindingOutcome.FAILED,
        PodStanding.TERMINATING: BindingOutcome.FAILED,
        PodStanding.MISSING: BindingOutcome.FAILED,
    }[standing]


def placement_problem(placement: PlacementEvent) -> str | None:
    """A decodable placement that still cannot be applied: names the field and the reason."""
    if not placement.uid:
        return "uid: empty"
    if not placement.namespace or not placement.name:
        return "namespace/name: empty"
    if placement.outcome is PlacementOutcome.PLACED and not placement.node:
        return "node: empty in a placed decision"
    for position, share in enumerate(placement.devices):
        problem = share_problem(share, position)
        if problem is not None:
            return problem
    return None


def describe_devices(devices: tuple[DeviceAssignment, ...]) -> str:
    """`0,1` for whole devices; `2 (8000 MiB, 50 cores)` for shares."""
    parts = []
    for d in devices:
        if d.memory_mib == 0 and d.cores >= 100:
            parts.append(str(d.index))
        else:
            memory = "all memory" if d.memory_mib == 0 else f"{d.memory_mib} MiB"
            parts.append(f"{d.index} ({memory}, {d.cores} cores)")
    return ",".join(parts) if parts else "none"


def _device_set(devices: tuple[DeviceAssignment, ...]) -> frozenset[tuple[int, int, int]]:
    return frozenset((d.index, d.memory_mib, d.cores) for d in devices)
