"""What InterPodAffinity and PodTopologySpread read of a pod, for its pending or bound event. Pure.

A pending pod carries its podAffinity / podAntiAffinity, its topologySpreadConstraints and its
DefaultSelector (the Services and the controller it belongs to: engine.decide.kube.default_selector,
from the selectors workloads.py keeps); a pod on a node, of any scheduler, carries its labels, its
pod (anti-)affinity and whether it is being deleted. Each term or constraint is checked as the API
server checks it; a bad one is left out and reported as (field, reason), the rest of the event goes
(translate.py's rule; it names the object).
"""

from __future__ import annotations

from typing import Any

import msgspec

from engine.decide.kube.default_selector import WorkloadSelectors
from schemas.events import PendingPodEvent, PodLifecycleEvent
from schemas.kube import PodAffinities, TopologySpreadConstraint
from services.collector.cluster.objects import Pod

# A bound pod's labels and pod affinity go on every pods.lifecycle record of it; past this many bytes
# (as JSON) they are left out, and the pod counts by its requests only. Its requests must still reach
# the placer (pods.lifecycle refuses an event over MAX_EVENT_BYTES, 256 KiB, and then the pod would not
# count at all); no pod a tenant writes needs this much to be told apart.
MAX_RUNNING_TOPOLOGY_BYTES = 64 * 1024

_encoder = msgspec.json.Encoder()
FieldProblem = tuple[str, str]  # the field, and why it was left out


def pod_affinities(pod: Pod) -> tuple[PodAffinities | None, list[FieldProblem]]:
    """The pod's podAffinity / podAntiAffinity (None: neither, or one the API server would refuse)."""
    if pod.spec.affinity is None:
        return None, []
    try:
        affinities = msgspec.convert(pod.spec.affinity, PodAffinities)
    except msgspec.ValidationError as exc:
        return None, [("spec.affinity", str(exc))]
    return (None if affinities.empty else affinities), []


def spread_constraints(pod: Pod) -> tuple[tuple[TopologySpreadConstraint, ...], list[FieldProblem]]:
    found: list[TopologySpreadConstraint] = []
    problems: list[FieldProblem] = []
    for i, raw in enumerate(pod.spec.topology_spread_constraints):
        constraint = _decoded(raw, pod, f"spec.topologySpreadConstraints[{i}]", problems)
        if constraint is not None:
            found.append(constraint)
    return tuple(found), problems


def _decoded(raw: Any, pod: Pod, field: str, problems: list[FieldProblem]) -> TopologySpreadConstraint | None:
    try:
        return msgspec.convert(raw, TopologySpreadConstraint)
    except msgspec.ValidationError as exc:
        problems.append((field, str(exc)))
        return None


def controller_of(pod: Pod) -> tuple[str, str] | None:
    owner = next((o for o in pod.metadata.owner_references if o.controller), None)
    return (owner.kind, owner.name) if owner is not None else None


def with_pending_topology(
    event: PendingPodEvent, pod: Pod, selectors: WorkloadSelectors | None
) -> tuple[PendingPodEvent, list[FieldProblem]]:
    """The pending event with the pod's affinities, spread constraints and DefaultSelector."""
    affinities, problems = pod_affinities(pod)
    constraints, constraint_problems = spread_constraints(pod)
    meta = pod.metadata
    default = selectors.default_selector(meta.namespace, meta.labels, controller_of(pod)) if selectors else None
    event = msgspec.structs.replace(
        event, affinities=affinities, topology_spread_constraints=constraints, default_spread_selector=default
    )
    return event, problems + constraint_problems


def with_running_topology(event: PodLifecycleEvent, pod: Pod) -> tuple[PodLifecycleEvent, list[FieldProblem]]:
    """The bound event with the pod's labels, pod affinity and terminating flag (within their bound)."""
    affinities, problems = pod_affinities(pod)
    labels = dict(pod.metadata.labels)
    size = len(_encoder.encode(labels)) + len(_encoder.encode(affinities))
    if size > MAX_RUNNING_TOPOLOGY_BYTES:
        reason = (
            f"labels and pod affinity take {size:,} bytes, over topoplace's bound of {MAX_RUNNING_TOPOLOGY_BYTES:,}: "
            "left out, the pod counts by its requests only"
        )
        problems.append(("metadata.labels", reason))
        labels, affinities = {}, None
    terminating = pod.metadata.deletion_timestamp is not None
    return msgspec.structs.replace(event, labels=labels, affinities=affinities, terminating=terminating), problems
