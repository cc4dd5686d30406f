"""Which nodes preemption tries: one per shape, and only the shapes that can still beat the best so far.

kube-scheduler (preemption.go, DryRunPreemption) dry-runs nodes from a random offset and stops once it
has max(10 % of the nodes, 100) candidates: it may miss the best node, and two runs over one cluster
may differ. Here the answer is the one trying every node would give (`every_candidate`), found
without trying them all:

    shapes         nodes a preemptor cannot tell apart get the same victims, position for position
                   (shapes.py): one node per shape is tried, its victims carried to the others
    a shape's bound   the least cost a node of the shape can have (bounds.py): no budget violated;
                   the least priority whose pods, with those below it, free what the preemptor
                   lacks there; the fewest of those pods that do; the latest start of a pod of that
                   priority on any of its nodes: a lower bound of pickOneNodeForPreemption's order
                   (`node_order_key`) on any node of the shape
    the walk       shapes whose bound reads the same (they differ only in which devices their pods
                   hold) share one bound, but for each shape's own latest start; the groups, then
                   their shapes, in order of their bound, until the next bound is worse than the best
                   candidate's order; on each shape tried, every node's order (the start times)
    exact when     the preemptor fits on no node as it is (preemption is asked only then); a shape
                   where nothing is lacking is tried first, and a node that needs no victim sends
                   the search to every node
    kept           per preemptor (its request but the uid and name, which of the pods' priorities are
                   below its own, the budgets) the walk and each shape's answer, while the nodes and
                   pods stay the same objects: a preemptor like an earlier one tries no node
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence

import msgspec

from engine.core.model import Mode, NodeState, Snapshot
from engine.decide.preempt.bounds import PRIORITY_OFFSET, BoundTable, Need, Walk
from engine.decide.preempt.model import Candidate, DisruptionBudget, RunningPod
from engine.decide.preempt.room import NOT_HELPFUL, Room
from engine.decide.preempt.shapes import BoundGroup, Shape, bound_groups, ordered_pods, shapes_of
from engine.decide.preempt.victims import select_victims, start_of

PREEMPTORS_KEPT = 64  # preemptors (request, priority rank, budgets) whose walk and shapes' answers are kept
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
        self._priorities = sorted({p.priority for p in running})  # the pods' distinct priorities
        self.requests_milli: dict[str, dict[str, int]] = {}  # each pod's requests parsed (Room.share_requests)
        self._shapes: dict[tuple[bool, bool], list[Shape]] = {}
        self._groups: dict[tuple[bool, bool], list[BoundGroup]] = {}
        self._bounds: dict[tuple[bool, bool], BoundTable] = {}
        self._preemptors: OrderedDict[tuple[object, ...], PreemptorMemo] = OrderedDict()

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

    def bound_table(self, *, labels: bool, names: bool) -> BoundTable:
        """The groups' floors and bound inputs (bounds.py), worked out once."""
        found = self._bounds.get((labels, names))
        if found is None:
            found = self._bounds[(labels, names)] = BoundTable(self.bound_groups(labels=labels, names=names))
        return found

    def priority_rank(self, priority: int) -> int:
        """How many of the pods' priorities are below `priority`: a preemption reads its priority only by
        which pods are below it, so preemptors of one rank have the same victims."""
        return bisect.bisect_left(self._priorities, priority)

    def preemptor_memo(self, key: tuple[object, ...], walk: Callable[[], Walk]) -> PreemptorMemo:
        """What the search keeps for one preemptor (`key`: its room's key, priority rank and budgets): its walk,
        made by `walk` the first time, and the answers of the shapes tried. The last PREEMPTORS_KEPT are kept."""
        found = self._preemptors.get(key)
        if found is not None:
            self._preemptors.move_to_end(key)
            return found
        found = self._preemptors[key] = PreemptorMemo(walk())
        if len(self._preemptors) > PREEMPTORS_KEPT:
            self._preemptors.popitem(last=False)
        return found


Tried = Candidate | bool | None  # _tried's answer for one shape


class PreemptorMemo:
    """One preemptor's walk over the groups, and the answer of each shape tried so far (by the shape's id:
    the shapes live as long as their PodsByNode, which is rebuilt when the nodes or the pods change)."""

    def __init__(self, walk: Walk) -> None:
        self.walk = walk
        self.tried: dict[int, Tried] = {}


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


def _walk(room: Room, pods: PodsByNode, priority: int, *, labels: bool, names: bool) -> Walk:
    """The groups that may hold a candidate, by bound (bounds.py), then by their first node."""
    device = room.claim.request
    whole = device.count if room.mode == Mode.DEFAULT and device is not None and device.count > 0 else 0
    need = Need(priority, room.rules.facts.requests, whole, room.wants_devices)
    return Walk(pods.bound_table(labels=labels, names=names), need)


def shaped_candidates(
    room: Room, pods: PodsByNode, priority: int, budgets: Sequence[DisruptionBudget]
) -> list[Candidate] | None:
    """The candidates on the nodes that could beat the best one (module docstring): the best among them
    is the best of every node's. None: try every node (a node needs no victim, or none is a candidate).
    The walk and the shapes' answers are kept per preemptor while the nodes and pods stay the same."""
    labels, names = bool(budgets), any(b.disrupted_pods for b in budgets)  # a budget naming pods tells them apart
    key = (room.key, pods.priority_rank(priority), msgspec.msgpack.encode(tuple(budgets), order="deterministic"))
    memo = pods.preemptor_memo(key, lambda: _walk(room, pods, priority, labels=labels, names=names))
    candidates: list[Candidate] = []
    best: list[Order] = []
    for bound, first, group in memo.walk:
        if best and (bound, first) > best[0]:
            break
        for own, shape in _own_bounds(bound, group):  # the group's bound but each shape's latest start
            if best and (own, shape.members[0]) > best[0]:
                break
            if id(shape) in memo.tried:
                found = memo.tried[id(shape)]
            else:
                found = memo.tried[id(shape)] = _tried(room, pods, shape, priority, budgets)
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
