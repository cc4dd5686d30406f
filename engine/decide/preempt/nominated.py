"""Room held for nominated pods: the one rule the placer and the binder both follow.

A pod nominated to a node (status.nominatedNodeName, after a preemption) is not running there
yet, but kube-scheduler counts it on that node (addNominatedPods, RunFilterPluginsWithNominatedPods)
for every pod of LOWER OR EQUAL priority, so that no such pod takes the room its victims are
freeing. A pod of higher priority ignores it (and may in turn preempt). What is held is the
nominated pod's own request and nothing more: its requests, one pod, its host ports, and the
device shares it is to get there (`NominatedRoom.devices`; a share, not the whole device: the
rest of a shared device stays free for others). The devices its victims free beyond that are
anyone's.

`held_from` says whose room a pod must leave alone and `held_shares` which device shares that
is on a node: the placer counts them in every decision (`with_nominated`), the binder refuses a
placement whose devices do not fit beside them, so the two cannot disagree about a placement.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from decimal import Decimal

import msgspec

from engine.core.model import Allocation, NodeState, Snapshot
from engine.decide.preempt.model import RunningPod
from schemas.kube import HostPort
from schemas.pod_requests import format_quantity
from schemas.quantity import parse_quantity


class NominatedRoom(msgspec.Struct, frozen=True, kw_only=True):
    """A pending pod nominated to `node` and the room it holds there once its victims are gone."""

    holder: str  # the pod's uid (the devices' `Allocation.pod_uid`)
    key: str  # namespace/name
    node: str
    priority: int
    requests: dict[str, str] = {}
    host_ports: tuple[HostPort, ...] = ()
    devices: tuple[Allocation, ...] = ()  # the shares it gets there; () when not known


def room_of(pod: RunningPod) -> NominatedRoom:
    """A nominated pod read from Kubernetes objects (no devices chosen for it yet)."""
    return NominatedRoom(
        holder=pod.holder,
        key=pod.key,
        node=pod.node,
        priority=pod.priority,
        requests=pod.requests,
        host_ports=pod.host_ports,
    )


def holds_from(holder_priority: int, priority: int) -> bool:
    """Whether a nominated pod of `holder_priority` holds its room from a pod of `priority`
    (kube's addNominatedPods: nominated pods of priority >= the pod's are counted)."""
    return holder_priority >= priority


def held_from(rooms: Sequence[NominatedRoom], priority: int, own: Collection[str] = ()) -> list[NominatedRoom]:
    """The rooms a pod of `priority` must leave alone. `own`: the pod itself, or every member of its
    gang (uids or namespace/names: a pod never holds room from itself)."""
    return [r for r in rooms if holds_from(r.priority, priority) and r.holder not in own and r.key not in own]


def held_shares(rooms: Sequence[NominatedRoom], node: str) -> tuple[Allocation, ...]:
    """The device shares the rooms hold on `node`."""
    return tuple(share for room in rooms if room.node == node for share in room.devices)


def _plus(node: NodeState, rooms: Sequence[NominatedRoom]) -> NodeState:
    requested = {k: parse_quantity(v) for k, v in node.requested.items()}
    for room in rooms:
        for resource, amount in room.requests.items():
            requested[resource] = requested.get(resource, Decimal(0)) + parse_quantity(amount)
    return msgspec.structs.replace(
        node,
        requested={k: format_quantity(v) for k, v in sorted(requested.items())},
        pods=node.pods + len(rooms),
        host_ports=(*node.host_ports, *(port for room in rooms for port in room.host_ports)),
        allocations=node.allocations + held_shares(rooms, node.name),
    )


def with_nominated_nodes(
    nodes: Sequence[NodeState], nominated: Sequence[NominatedRoom | RunningPod], priority: int, own: Collection[str]
) -> list[NodeState]:
    """The nodes changed by the room held on them from a pod of `priority` (`held_from`), and only those."""
    rooms = held_from([p if isinstance(p, NominatedRoom) else room_of(p) for p in nominated], priority, own)
    by_node: dict[str, list[NominatedRoom]] = {}
    for room in rooms:
        by_node.setdefault(room.node, []).append(room)
    return [_plus(n, by_node[n.name]) for n in nodes if n.name in by_node]


def with_nominated(
    snapshot: Snapshot, nominated: Sequence[NominatedRoom | RunningPod], priority: int, own: str | Collection[str]
) -> Snapshot:
    """The snapshot with each node holding the room of the pods nominated to it that a pod of
    `priority` must leave alone; `own` (the pod placed: its namespace/name or uid) is never counted."""
    owned = (own,) if isinstance(own, str) else own
    changed = {n.name: n for n in with_nominated_nodes(snapshot.nodes, nominated, priority, owned)}
    if not changed:
        return snapshot
    return msgspec.structs.replace(snapshot, nodes=tuple(changed.get(n.name, n) for n in snapshot.nodes))
