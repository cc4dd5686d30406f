"""Which nodes preemption tries: one per shape, and only the shapes that can still beat the best so far.

kube-scheduler (preemption.go, DryRunPreemption) dry-runs nodes from a random offset and stops once it
has max(10 % of the nodes, 100) candidates: it may miss the best node, and two runs over one cluster
may differ. Here the answer is the one trying every node would give (`every_candidate`), found
without trying them all:

    shapes         nodes a preemptor cannot tell apart get the same victims, position for position
                   (shapes.py): one node per shape is tried, its victims carried to the others
    a shape's bound   at least k victims, where k is the fewest of its lower-priority pods whose
                   requests (and whole devices) can free what the preemptor lacks there: no budget
                   violated, the k-th lowest priority the highest, the k lowest summed, k pods, the
                   latest start of a pod of that priority on any of its nodes: a lower bound of
                   pickOneNodeForPreemption's order (`node_order_key`) on any node of the shape
    the walk       shapes whose bound reads the same (they differ only in which devices their pods
                   hold) share one bound, but for each shape's own latest start; the groups, then
                   their shapes, in order of their bound, until the next bound is worse than the best
                   candidate's order; on each shape tried, every node's order (the start times)
    exact when     the preemptor fits on no node as it is (preemption is asked only then); a shape
                   where nothing is lacking is tried first, and a node that needs no victim sends
                   the search to every node
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import msgspec

from engine.core.model import Mode, NodeState, Snapshot
from engine.decide.preempt.model import Candidate, DisruptionBudget, RunningPod
from engine.decide.preempt.room import NOT_HELPFUL, Room
from engine.decide.preempt.shapes import BoundGroup, Shape, bound_groups, ordered_pods, shapes_of
from engine.decide.preempt.victims import select_victims, start_of

PRIORITY_OFFSET = 2**31  # upstream adds MaxInt32 + 1 so that negative priorities sum as they should
Order = tuple[tuple[float, ...], str]


def node_order_key(candidate: Candidate) -> tuple[float, ...]:
    """Smaller is better: pickOneNodeForPreemption's criteria in order, then ours (see choose.py)."""
    victims = candidate.victims
    if not victims:
        return (-math.inf,)  # a node that needs no eviction (pods left while we looked): take it
    top = victims[0].priority
    earliest = min(start_of(p) for p in victims if p.priority == top)
    return (
        float(candidate.budget_violations),
        float(top),
        float(sum(p.priority + PRIORITY_OFFSET for p in victims)),
        float(len(victims)),
        -earliest,
        -candidate.set_score,
        candidate.remainder_loss,
    )


class PodsByNode:
    """The snapshot's nodes by name, the running pods by node (most important first), and their shapes."""

    def __init__(self, snapshot: Snapshot, running: Sequence[RunningPod]) -> None:
        self.snapshot_nodes = snapshot.nodes
        self.running = running
        self.nodes = {n.name: n for n in snapshot.nodes}
        on_node: dict[str, list[RunningPod]] = {}
        for pod in running:
            on_node.setdefault(pod.node, []).append(pod)
        self.ordered = ordered_pods(on_node)
        self._shapes: dict[tuple[bool, bool], list[Shape]] = {}
        self._groups: dict[tuple[bool, bool], list[BoundGroup]] = {}

    def matches(self, snapshot: Snapshot, running: Sequence[RunningPod]) -> bool:
        """Whether this was built from these very objects (the cache's key)."""
        return self.snapshot_nodes is snapshot.nodes and self.running is running

    def pods_on(self, name: str) -> Sequence[RunningPod]:
        return self.ordered.get(name, ())

    def shapes(self, *, labels: bool, names: bool) -> list[Shape]:
        """The shapes of the nodes (`labels`, `names`: the pods' labels, names tell nodes apart too)."""
        found = self._shapes.get((labels, names))
        if found is None:
            found = self._shapes[(labels, names)] = shapes_of(self.nodes, self.ordered, labels=labels, names=names)
        return found

    def bound_groups(self, *, labels: bool, names: bool) -> list[BoundGroup]:
        """The shapes grouped by what their bound reads (shapes.py)."""
        found = self._groups.get((labels, names))
        if found is None:
            found = self._groups[(labels, names)] = bound_groups(self.shapes(labels=labels, names=names))
        return found


def _fewest(frees: list[int], need: int) -> int | None:
    """The fewest of `frees` whose sum reaches `need` (0 when nothing is needed; None: all cannot)."""
    if need <= 0:
        return 0
    total = 0
    for k, amount in enumerate(sorted(frees, reverse=True), start=1):
        total += amount
        if total >= need:
            return k
    return None


def _bound(
    room: Room, shape: Shape, priority: int, lacking: dict[str, int], latest_of: dict[int, float]
) -> tuple[float, ...] | None:
    """The shape's bound (module docstring); None: no node of the shape can be a candidate."""
    priorities = shape.priorities
    cut = bisect.bisect_left([-p for p in priorities], -priority + 1)  # the first of lower priority
    if cut == len(priorities):
        return None
    fewest = 0
    if shape.free is not None:
        for resource, want in lacking.items():
            if resource in shape.free:
                frees = [r.get(resource, 0) for r in shape.requests[cut:]]
                k = _fewest(frees, want - shape.free[resource])
                if k is None:
                    return None
                fewest = max(fewest, k)
    device = room.claim.request
    if room.mode == Mode.DEFAULT and device is not None and device.count > 0:  # whole devices
        k = _fewest(shape.devices_held[cut:], device.count - shape.devices_free)
        if k is None:
            return None
        fewest = max(fewest, k)
    if fewest == 0:
        return (-math.inf,)
    lowest = priorities[len(priorities) - fewest :]  # the k lowest, the k-th lowest first
    tail = (-math.inf, -math.inf) if room.wants_devices else (-0.0, 0.0)
    latest = latest_of.get(lowest[0], math.inf)
    return (0.0, float(lowest[0]), float(sum(lowest) + fewest * PRIORITY_OFFSET), float(fewest), -latest, *tail)


def _best_member(found: Candidate, rep: Sequence[RunningPod], shape: Shape, pods: PodsByNode) -> Candidate:
    """The shape's best node: its nodes differ only in the start times of the pods at the victims'
    positions; the latest earliest start among the highest-priority victims wins, then the name."""
    at = {p.key: i for i, p in enumerate(rep)}
    positions = [at[v.key] for v in found.victims]
    top = found.victims[0].priority
    tops = [i for i in positions if rep[i].priority == top]
    # per member, the earliest start at those positions; the first member of the latest (thousands of
    # members in a packed cluster: columns of start times kept per shape, compared in bulk)
    columns = [shape.starts_at(i, pods.ordered) for i in tops]
    earliest = columns[0] if len(columns) == 1 else list(map(min, *columns))
    best_name = shape.members[max(range(len(earliest)), key=earliest.__getitem__)]
    if best_name == rep[0].node:
        return found
    on = pods.ordered[best_name]
    return msgspec.structs.replace(found, node=best_name, victims=tuple(on[i] for i in positions))


def _own_bounds(bound: tuple[float, ...], group: BoundGroup) -> list[tuple[tuple[float, ...], Shape]]:
    if len(bound) == 1:
        return [(bound, shape) for shape in group.shapes]
    at = int(bound[1])
    owns = [((*bound[:4], -shape.latest.get(at, math.inf), *bound[5:]), shape) for shape in group.shapes]
    owns.sort(key=lambda o: (o[0], o[1].members[0]))
    return owns


def _tried(
    room: Room, pods: PodsByNode, shape: Shape, priority: int, budgets: Sequence[DisruptionBudget]
) -> Candidate | bool | None:
    """The shape's best candidate; False: its nodes are none; None: one needs no victim (try every node)."""
    first = shape.members[0]
    rep_node = pods.nodes[first]
    if room.unresolvable(rep_node) is not None:
        return False
    rep = pods.pods_on(first)
    found = select_victims(room, rep_node, rep, priority, budgets)
    if not isinstance(found, Candidate):
        return False
    if not found.victims:
        return None
    return _best_member(found, rep, shape, pods)


def shaped_candidates(
    room: Room, pods: PodsByNode, priority: int, budgets: Sequence[DisruptionBudget]
) -> list[Candidate] | None:
    """The candidates on the nodes that could beat the best one (module docstring): the best among them
    is the best of every node's. None: try every node (a node needs no victim, or none is a candidate)."""
    lacking = room.rules.facts.requests  # the resources the node rules check (the vendors': devices)
    walk: list[tuple[tuple[float, ...], str, BoundGroup]] = []
    names = any(b.disrupted_pods for b in budgets)  # a budget that names pods tells them apart
    for group in pods.bound_groups(labels=bool(budgets), names=names):
        bound = _bound(room, group.first, priority, lacking, group.latest)
        if bound is not None:
            walk.append((bound, group.first.members[0], group))
    walk.sort(key=lambda w: (w[0], w[1]))
    candidates: list[Candidate] = []
    best: list[Order] = []
    for bound, first, group in walk:
        if best and (bound, first) > best[0]:
            break
        for own, shape in _own_bounds(bound, group):  # the group's bound but each shape's latest start
            if best and (own, shape.members[0]) > best[0]:
                break
            found = _tried(room, pods, shape, priority, budgets)
            if found is None:
                return None
            if isinstance(found, Candidate):
                candidates.append(found)
                order = (node_order_key(found), found.node)
                if not best or order < best[0]:
                    best[:] = [order]
    return candidates or None


def every_candidate(
    room: Room, nodes: dict[str, NodeState], pods: PodsByNode, priority: int, budgets: Sequence[DisruptionBudget]
) -> tuple[list[Candidate], list[str]]:
    """Every node tried: the candidates, and the reasons of the nodes that are none."""
    reasons: list[str] = []
    candidates: list[Candidate] = []
    for name in sorted(nodes):
        node = nodes[name]
        if room.unresolvable(node) is not None:
            reasons.append(NOT_HELPFUL)
            continue
        found = select_victims(room, node, pods.pods_on(name), priority, budgets)
        if isinstance(found, Candidate):
            candidates.append(found)
        else:
            reasons.extend(found)
    return candidates, reasons
