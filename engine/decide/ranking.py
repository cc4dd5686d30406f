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
from collections.abc import Callable, Sequence

import msgspec

from engine.cluster.index import ClusterIndex, class_state
from engine.core.cache import BoundedCache
from engine.core.model import Mode, NodeState
from engine.decide.claim import NO_DEVICES, Claim
from engine.decide.node_rules import PodRules
from engine.node import answer as node_answer
from engine.node.answer import NodeFit, NodeMiss, outcome, request_id_of

Answer = NodeFit | NodeMiss


CLASS_ANSWER_BOUND = 4_096  # answers of classes no node has any more, kept per request before a prune


# Per request id, the answer of every device class met: a plain dict, read once per class per decision.
# The least recently used request's table goes first; a table is pruned to the live classes.
REQUEST_TABLES_BOUND = 256


_class_answers: BoundedCache[int, dict[int, Answer]] = BoundedCache(REQUEST_TABLES_BOUND)


# Nodes sharing one answer: a device class, or one node when the answer reads the node's own UUIDs.
# A plain tuple (answer, member names): a decision builds one per class.
Group = tuple[Answer, Sequence[str]]


RANKINGS_PER_INDEX = 64  # request shapes whose ranking an index keeps


class Ranking:
    """One request's fitting classes of one index, best first, kept current from the index's class log.

    Classes whose last node left stay in the list until a walk meets them (then they go); a class
    that comes back is put back. The answers themselves are the global per-request table."""

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


def fast_ranking(index: ClusterIndex, pod_claim: Claim, mode: Mode) -> tuple[Ranking, dict[int, Answer]] | None:
    """The request's ranking, brought up to date, and its answer table; None when the request
    cannot be ranked this way (no memo tables, UUID-reading requests, pods without devices)."""
    plugin, device_request = pod_claim.plugin, pod_claim.request
    if plugin is None or device_request is None or device_request.reads_uuids:
        return None
    request_id = request_id_of(plugin, device_request, mode)
    if request_id is None:
        return None
    table = _answer_table(index, request_id)

    def answer_of(class_id: int) -> Answer:
        answer = table.get(class_id)
        if answer is None:
            members = index.members(class_id)
            state = class_state(index.node(members[0]), index.reads)
            answer = table[class_id] = node_answer.evaluate(plugin, device_request, state, mode)
        return answer

    ranking = index.rankings.get(request_id)
    if not isinstance(ranking, Ranking):
        ranking = Ranking()
    index.rankings[request_id] = ranking
    index.rankings.move_to_end(request_id)
    while len(index.rankings) > RANKINGS_PER_INDEX:
        index.rankings.popitem(last=False)
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


def _answer_table(index: ClusterIndex, request_id: int) -> dict[int, Answer]:
    table = _class_answers.get(request_id)
    if table is None:
        table = {}
        _class_answers.put(request_id, table)
    elif len(table) > 2 * index.class_count() + CLASS_ANSWER_BOUND:
        for class_id in [c for c in table if not index.is_live(c)]:
            del table[class_id]  # classes no node has any more: ids are never reused
    return table


def groups_of(index: ClusterIndex, pod_claim: Claim, mode: Mode) -> list[Group]:
    plugin, device_request = pod_claim.plugin, pod_claim.request
    if plugin is None or device_request is None:
        return [(NO_DEVICES, members) for _, members in index.classes()]
    request_id = request_id_of(plugin, device_request, mode)
    if device_request.reads_uuids:
        # The answer depends on the node's own UUIDs: one node, one answer.
        return [
            (outcome(plugin, device_request, without_node_rules(node), mode, request_id), (node.name,))
            for node in index.nodes()
        ]
    table = _answer_table(index, request_id) if request_id is not None else None
    groups: list[Group] = []
    get = table.get if table is not None else (lambda _: None)
    for class_id, members in index.classes():
        answer = get(class_id)
        if answer is None:
            answer = node_answer.evaluate(
                plugin, device_request, class_state(index.node(members[0]), index.reads), mode
            )
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
