"""Nodes of one shape: preemption gives them the same victims, position for position.

Two nodes have one *shape* when a preemptor cannot tell them apart once their pods are listed
most important first: the same node apart from its name (devices and links the same objects,
as the nodes of one machine type share them; the pods' labels for InterPodAffinity are not read
by preemption), and position for position pods of the same priority, requests, host ports and
held device shares (and, when budgets are given, the same namespace and labels; the same name when a budget
names the pods it counted). Start
times only order the pods; they differ freely. The victims on one node of a shape are the pods
at the same positions on every other (kube's reprieve and the device choice walk the pods in
that order), so a preemption tries one node per shape.

A packed cluster of 10,000 nodes has from 15 shapes (four 8-CPU pods of three priorities per node)
to about 5,000 (DGX H100 nodes whose pods of 1, 2 and 4 GPUs have three priorities); a shape's nodes
differ only in the start times of their pods, which the node order reads after four other criteria.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from engine.core.model import Allocation, NodeState
from engine.decide.kube.resources import parse_requests
from engine.decide.node_rules import node_facts
from engine.decide.preempt.model import RunningPod
from engine.decide.preempt.victims import importance_order, start_of


class Shape:
    """The nodes of one shape (sorted by name), and what its bound reads (search.py), read off its first."""

    def __init__(self, node: NodeState, pods: Sequence[RunningPod]) -> None:
        self.members: list[str] = [node.name]
        self.priorities = tuple(p.priority for p in pods)  # most important first: never increasing
        self.latest: dict[int, float] = {}  # per priority: the latest start of a pod of it on any member
        self._starts: dict[int, list[float]] = {}  # starts_at's answers, by pod position
        self.requests = [parse_requests(p.requests, f"{p.key}: requests") for p in pods]  # milli-units
        facts = node_facts(node)
        self.free: dict[str, int] | None = None  # what the node rules count free; None: not reported
        if facts.allocatable is not None:
            self.free = {r: v - facts.requested.get(r, 0) for r, v in facts.allocatable.items()}
        holders: dict[str, set[int]] = {}
        for a in node.allocations:
            holders.setdefault(a.pod_uid, set()).add(a.index)
        self.devices_held = [len(holders.get(p.holder, ())) if p.holder else 0 for p in pods]
        self.devices_total = len(node.devices)
        self.devices_free = self.devices_total - len({a.index for a in node.allocations})
        # What the bound (search.py) reads but the start times: shapes that differ only in which devices
        # their pods hold share it.
        self.bound_key = (
            self.priorities,
            tuple(self.devices_held),
            tuple(tuple(sorted(r.items())) for r in self.requests),
            tuple(sorted(self.free.items())) if self.free is not None else None,
            self.devices_free,
        )

    def starts_at(self, position: int, ordered: Mapping[str, Sequence[RunningPod]]) -> list[float]:
        """Each member's start time of its pod at `position` (members in order; `ordered`: the pods by
        node, most important first), worked out once per position."""
        found = self._starts.get(position)
        if found is None:
            found = self._starts[position] = [start_of(ordered[name][position]) for name in self.members]
        return found

    def add_starts(self, pods: Sequence[RunningPod]) -> None:
        for pod in pods:
            start = start_of(pod)
            if start > self.latest.get(pod.priority, -float("inf")):
                self.latest[pod.priority] = start


def _share(a: Allocation) -> tuple[int, int, int, str, str]:
    return (a.index, a.memory_mib, a.cores, a.qos, a.app_class)


class BoundGroup:
    """Shapes of one bound key: the first read for the bound, the latest start per priority over all."""

    def __init__(self, first: Shape) -> None:
        self.first = first
        self.shapes: list[Shape] = []
        self.latest: dict[int, float] = {}

    def add(self, shape: Shape) -> None:
        self.shapes.append(shape)
        for priority, start in shape.latest.items():
            if start > self.latest.get(priority, -float("inf")):
                self.latest[priority] = start


def bound_groups(shapes: Sequence[Shape]) -> list[BoundGroup]:
    groups: dict[tuple[object, ...], BoundGroup] = {}
    for shape in shapes:
        group = groups.get(shape.bound_key)
        if group is None:
            group = groups[shape.bound_key] = BoundGroup(shape)
        group.add(shape)
    return list(groups.values())


def shape_key(node: NodeState, ordered: Sequence[RunningPod], *, labels: bool, names: bool) -> tuple[object, ...]:
    """What a preemptor reads of the node and its pods (`ordered`: most important first), without names."""
    held: dict[str, list[tuple[int, int, int, str, str]]] = {}
    for a in node.allocations:
        held.setdefault(a.pod_uid, []).append(_share(a))
    pods = tuple(
        (
            p.priority,
            tuple(sorted(p.requests.items())),
            p.host_ports,
            tuple(held.pop(p.holder, ())) if p.holder else (),
            (p.namespace, tuple(sorted(p.labels.items()))) if labels else None,
            p.name if names else None,
        )
        for p in ordered
    )
    others = tuple(sorted(share for shares in held.values() for share in shares))  # held by no pod given
    rest = msgspec.structs.replace(node, name="", devices=(), links=(), allocations=(), running=())
    return (id(node.devices), id(node.links), msgspec.msgpack.encode(rest, order="deterministic"), pods, others)


def shapes_of(
    nodes: dict[str, NodeState], ordered: dict[str, list[RunningPod]], *, labels: bool, names: bool
) -> list[Shape]:
    """The shapes of the nodes that run pods (`ordered`: each node's pods, most important first)."""
    found: dict[tuple[object, ...], Shape] = {}
    for name in sorted(ordered):
        node = nodes.get(name)
        if node is None:
            continue
        pods = ordered[name]
        key = shape_key(node, pods, labels=labels, names=names)
        shape = found.get(key)
        if shape is None:
            shape = found[key] = Shape(node, pods)
        else:
            shape.members.append(name)
        shape.add_starts(pods)
    return list(found.values())


def ordered_pods(on_node: dict[str, list[RunningPod]]) -> dict[str, list[RunningPod]]:
    """Each node's pods, most important first (kube's MoreImportantPod, then by name)."""
    return {name: importance_order(pods) for name, pods in on_node.items()}
