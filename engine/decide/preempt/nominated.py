"""Room held for nominated pods: kube's filters count, on a node, the pods nominated to it.

A pod nominated to a node (status.nominatedNodeName, after a preemption) is not
running there yet, but kube-scheduler's filters (RunFilterPluginsWithNominatedPods)
count it on that node for every pod of lower or equal priority, so that no such
pod takes the room its victims are freeing. A pod of higher priority ignores it
(and may in turn preempt). Counted as a running pod is: its requests, one pod,
its host ports; it holds no particular device yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import msgspec

from engine.core.model import NodeState, Snapshot
from engine.decide.preempt.model import RunningPod
from schemas.pod_requests import format_quantity
from schemas.quantity import parse_quantity


def _plus(node: NodeState, pods: Sequence[RunningPod]) -> NodeState:
    requested = {k: parse_quantity(v) for k, v in node.requested.items()}
    for pod in pods:
        for resource, amount in pod.requests.items():
            requested[resource] = requested.get(resource, Decimal(0)) + parse_quantity(amount)
    return msgspec.structs.replace(
        node,
        requested={k: format_quantity(v) for k, v in sorted(requested.items())},
        pods=node.pods + len(pods),
        host_ports=(*node.host_ports, *(port for pod in pods for port in pod.host_ports)),
    )


def with_nominated(snapshot: Snapshot, nominated: Sequence[RunningPod], priority: int, own: str) -> Snapshot:
    """The snapshot with each node holding the room of the pods nominated to it (`RunningPod.node`) whose
    priority is at least `priority`; `own` (namespace/name) is the pod being placed, never counted."""
    held: dict[str, list[RunningPod]] = {}
    for pod in nominated:
        if pod.priority >= priority and pod.key != own:
            held.setdefault(pod.node, []).append(pod)
    if not held:
        return snapshot
    nodes = tuple(_plus(n, held[n.name]) if n.name in held else n for n in snapshot.nodes)
    return msgspec.structs.replace(snapshot, nodes=nodes)
