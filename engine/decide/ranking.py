"""One pod's answers per device class, ranked, and the walk that finds the best node passing the node rules.

for each device class:       the vendor's answer, memoised across decisions (per request)
rank the fitting classes:    higher score first; kept current per index from its class log
walk them, best first:       within a class, nodes in name order; the first that passes the pod's
                             node rules is the class's best (with preferences, the best by score +
                             preference); stop once no later class can reach the best found
"""

from __future__ import annotations

import bisect
import heapq
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence

import msgspec

from engine.cluster.index import ClusterIndex, DeviceClasses
from engine.core.memo import BoundedCache, Memo
from engine.core.model import Mode, NodeState
from engine.decide.claim import NO_DEVICES, Claim
from engine.decide.node_rules import PodRules
from engine.node.answer import NodeAnswers, NodeFit, NodeMiss

Answer = NodeFit | NodeMiss


CLASS_ANSWER_BOUND = 4_096  # answers of classes no node has any more, kept per request before a prune


# Per request id, the answer of every device class met: a plain dict, read once per class per decision.
# The least recently used request's table goes first; a table is pruned to the live classes.
REQUEST_TABLES_BOUND = 256


# Nodes sharing one answer: a device class, or one node when the answer reads the node's own UUIDs.
# A plain tuple (answer, member names): a decision builds one per class.
Group = tuple[Answer, Sequence[str]]


RANKINGS_PER_INDEX = 64  # request shapes whose ranking an index keeps


class ClassAnswers:
    """One engine's answers per device class, and its rankings.

    Class ids are those of an index's DeviceClasses, so answers are kept per DeviceClasses (indexes the
    engine makes share its own); rankings follow one index's class log, so they are kept per index.
    Both go when their index (or class ids) go, and with `clear`."""

    def __init__(self, memo: Memo, node: NodeAnswers) -> None:
        self.memo = memo
        self.node = node
        self._tables: weakref.WeakKeyDictionary[DeviceClasses, BoundedCache[int, dict[int, Answer]]] = (
            weakref.WeakKeyDictionary()
        )
        self._rankings: weakref.WeakKeyDictionary[ClusterIndex, OrderedDict[int, Ranking]] = weakref.WeakKeyDictionary()

    def table(self, index: ClusterIndex, request_id: int) -> dict[int, Answer]:
        """The request's answer per class id of `index` (pruned to the live classes when it grows long)."""
        tables = self._tables.get(index.device_classes)
        if tables is None:
            tables = self._tables[index.device_classes] = self.memo.table(REQUEST_TABLES_BOUND)
        table = tables.get(request_id)
        if table is None:
            table = {}
            tables.put(request_id, table)
        elif len(table) > 2 * index.class_count() + CLASS_ANSWER_BOUND:
            for class_id in [c for c in table if not index.is_live(c)]:
                del table[class_id]  # classes no node has any more: ids are never reused
        return table

    def ranking(self, index: ClusterIndex, request_id: int) -> Ranking:
        """The request's ranking over `index` (the most recently used RANKINGS_PER_INDEX are kept)."""
        rankings = self._rankings.get(index)
        if rankings is None:
            rankings = self._rankings[index] = OrderedDict()
        ranking = rankings.get(request_id)
        if ranking is None:
            ranking = Ranking()
        rankings[request_id] = ranking
        rankings.move_to_end(request_id)
        while len(rankings) > RANKINGS_PER_INDEX:
            rankings.popitem(last=False)
        return ranking

    def clear(self) -> None:
        self._tables.clear()
        self._rankings.clear()


class Ranking:
    """One request's fitting classes of one index, best first, kept current from the index's class log.

    Classes whose last node left stay in the list until a walk meets them (then they go); a class
    that comes back is put back. The answers themselves are the engine's per-request table."""

    __slots__ = ("epoch", "listed", "position", "ranked")

    def __init__(self) -> None:
        self.ranked: list[tuple[float, int]] = []  # (-score, class id), ascending
        self.listed: set[int] = set()
        self.position = 0  # how much of the index's class log is read
        self.epoch = -1

    def sync(self, index: ClusterIndex, answer_of: Callable[[int], Answer]) -> None:
        if self.epoch != index.log_epoch:
            self.ranked, self.listed = [], set()
            self.epoch, self.position = index.log_epoch, 0
            new: Sequence[int] = [class_id for class_id, _ in index.classes()]
        else:
            new = index.class_log[self.position :]
        self.position = len(index.class_log)
        for class_id in new:
            if class_id in self.listed or not index.is_live(class_id):
                continue
            answer = answer_of(class_id)
            if answer.__class__ is NodeFit:
                bisect.insort(self.ranked, (-answer.score.score, class_id))
                self.listed.add(class_id)

    def forget(self, at: int) -> None:
        _, class_id = self.ranked.pop(at)
        self.listed.discard(class_id)


def fast_ranking(
    answers: ClassAnswers, index: ClusterIndex, pod_claim: Claim, mode: Mode
) -> tuple[Ranking, dict[int, Answer]] | None:
    """The request's ranking, brought up to date, and its answer table; None when the request
    cannot be ranked this way (no memo tables, UUID-reading requests, pods without devices)."""
    plugin, device_request = pod_claim.plugin, pod_claim.request
    if plugin is None or device_request is None or device_request.reads_uuids:
        return None
    request_id = answers.node.request_id_of(plugin, device_request, mode)
    if request_id is None:
        return None
    table = answers.table(index, request_id)
    evaluate = answers.node.evaluate
    cpu_blind = index.device_classes.cpu_blind if index.reads.resources else None

    def answer_of(class_id: int) -> Answer:
        answer = table.get(class_id)
        if answer is not None:
            return answer
        # Vendors never read a node's CPU (only the node policy's score does): a class refused once is
        # refused with any CPU, so a refusal is shared by the classes that differ only there.
        blind = cpu_blind(class_id) if cpu_blind is not None else None
        if blind is not None and blind != class_id:
            shared = table.get(blind)
            if shared is not None and shared.__class__ is NodeMiss:
                table[class_id] = shared
                return shared
        answer = table[class_id] = evaluate(plugin, device_request, index.class_state(class_id), mode)
        if blind is not None and answer.__class__ is NodeMiss:
            table.setdefault(blind, answer)
        return answer

    ranking = answers.ranking(index, request_id)
    ranking.sync(index, answer_of)
    return ranking, table


def fast_best(
    ranked: tuple[Ranking, dict[int, Answer]],
    index: ClusterIndex,
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
) -> tuple[float, str, Group] | None:
    """The walk over the request's ranking, without touching every class."""
    ranking, table = ranked
    best: tuple[float, str, Group] | None = None
    ceiling = rules.max_preference
    at = 0
    while at < len(ranking.ranked):
        negative, class_id = ranking.ranked[at]
        members = index.members(class_id)
        if not members:
            ranking.forget(at)  # no node has this class any more
            continue
        at += 1
        score = -negative
        if best is not None and score + ceiling < best[0]:
            break
        best = scan(index, (table[class_id], members), score, rules, allowed, best)
    return best


def groups_of(answers: ClassAnswers, index: ClusterIndex, pod_claim: Claim, mode: Mode) -> list[Group]:
    """Every class (or node, for a UUID-reading request) with its answer."""
    plugin, device_request = pod_claim.plugin, pod_claim.request
    if plugin is None or device_request is None:
        return [(NO_DEVICES, members) for _, members in index.classes()]
    node_answers = answers.node
    request_id = node_answers.request_id_of(plugin, device_request, mode)
    if device_request.reads_uuids:
        # The answer depends on the node's own UUIDs: one node, one answer.
        return [
            (node_answers.outcome(plugin, device_request, without_node_rules(node), mode, request_id), (node.name,))
            for node in index.nodes()
        ]
    table = answers.table(index, request_id) if request_id is not None else None
    groups: list[Group] = []
    get = table.get if table is not None else (lambda _: None)
    for class_id, members in index.classes():
        answer = get(class_id)
        if answer is None:
            answer = node_answers.evaluate(plugin, device_request, index.class_state(class_id), mode)
            if table is not None:
                table[class_id] = answer
        groups.append((answer, members))
    return groups


def without_node_rules(node: NodeState) -> NodeState:
    """Readiness and cordon are node rules here, not the vendor's: the per-node answer ignores them."""
    if node.ready and not node.unschedulable:
        return node
    return msgspec.structs.replace(node, ready=True, unschedulable=False)


def best_of_groups(
    index: ClusterIndex,
    groups: list[Group],
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
) -> tuple[float, str, Group] | None:
    """The highest score + preference, ties to the first name, among nodes passing the node rules.

    Groups are taken best score first from a heap, so a decision that finds its node in the
    best group never orders the rest."""
    heap = [(-answer.score.score, i) for i, (answer, _) in enumerate(groups) if answer.__class__ is NodeFit]
    heapq.heapify(heap)
    best: tuple[float, str, Group] | None = None
    ceiling = rules.max_preference
    while heap:
        negative, i = heapq.heappop(heap)
        score, group = -negative, groups[i]
        if best is not None and score + ceiling < best[0]:
            break  # taken best first: no later group can reach the best
        best = scan(index, group, score, rules, allowed, best)
    return best


def scan(
    index: ClusterIndex,
    group: Group,
    score: float,
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
    best: tuple[float, str, Group] | None,
) -> tuple[float, str, Group] | None:
    """The group's nodes in name order against the best so far: node rules, then score + preference."""
    ceiling = rules.max_preference
    members: Sequence[str] = group[1]
    if rules.only_node is not None:
        members = (rules.only_node,) if rules.only_node in members else ()
    for name in members:
        if allowed is not None and not allowed(name):
            continue
        node = index.node(name)
        if rules.failure(node) is not None:
            continue
        total = score + rules.preference(node) if ceiling or node.taints else score
        if best is None or total > best[0] or (total == best[0] and name < best[1]):
            best = (total, name, group)
        if total >= score + ceiling:
            break  # names come sorted: nobody later in this group does better
    return best
