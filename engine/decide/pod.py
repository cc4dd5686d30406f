"""One pod's decision over the cluster index: class answers, ranked, then node rules, best first.

    for each device class:       the vendor's answer, memoised (cache.py) — a fit with its node score, or why not
    rank the fitting classes:    higher score first
    walk them, best first:       within a class, nodes in name order; the first that passes the pod's
                                 node rules (node_rules.py) is the class's best (with preferences, the
                                 best by score + preference); stop once no later class can reach the best
    nothing passes:              every node's reason, counted as kube-scheduler does

The result is the same as asking every node and sorting by (-score, name), which
bench/reference_loop.py does and a test compares, at a cost that depends on the number
of classes, not of nodes. Explanations of the losers are built only when asked.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator, Sequence

import msgspec

from engine.cluster.index import ClusterIndex, class_state
from engine.core.cache import BoundedCache
from engine.core.model import Decision, Mode, NodeState, NodeVerdict, PodRequest, WorkloadClass
from engine.decide.kube.messages import fit_error_message
from engine.decide.node_rules import PodRules, pod_cpu_milli
from engine.node import answer as node_answer
from engine.node.answer import NodeFit, NodeMiss, evaluate_node, outcome, request_id_of, with_workload
from engine.node.explain import loser_reason
from engine.node.vendor import (
    DeviceRequest,
    NodeScore,
    SetChoice,
    VendorPlugin,
    VendorRegistry,
)
from schemas.events import DeviceAssignment

Answer = NodeFit | NodeMiss
CLASS_ANSWER_BOUND = 4_096  # answers of classes no node has any more, kept per request before a prune
# Per request id, the answer of every device class met: a plain dict, read once per class per decision.
# The least recently used request's table goes first; a table is pruned to the live classes.
REQUEST_TABLES_BOUND = 256
_class_answers: BoundedCache[int, dict[int, Answer]] = BoundedCache(REQUEST_TABLES_BOUND)
# A pod that asks for no device fits every node's devices with nothing to choose.
NO_DEVICES = NodeFit(node="", choice=SetChoice(assignments=()), score=NodeScore(score=0.0))


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """The pod as the vendors read it: the vendor that claims it and its parsed request (None: no devices)."""

    plugin: VendorPlugin | None
    request: DeviceRequest | None


def claim(
    registry: VendorRegistry,
    request: PodRequest,
    mode: Mode,
    workload: tuple[WorkloadClass, ...],
    *,
    cpu: bool = False,
) -> Claim:
    """The pod's vendor and parsed request; `cpu`: the index reads each node's CPU, so the fragmentation
    policy weighs the pod's. A pod without devices is still scored by a vendor's fragmentation policy
    when the workload is known (FGD places CPU-only pods too); otherwise it asks nothing of the vendors."""
    claimed = registry.claim(request)
    if claimed is None and workload and mode is Mode.DEFAULT:
        claimed = registry.claim_host(request)
    if claimed is None:
        return Claim(plugin=None, request=None)
    plugin, device_request = claimed
    device_request = with_workload(device_request, workload, mode, pod_cpu_milli(request) if cpu else None)
    return Claim(plugin=plugin, request=device_request)


# Nodes sharing one answer: a device class, or one node when the answer reads the node's own UUIDs.
# A plain tuple (answer, member names): a decision builds one per class.
_Group = tuple[Answer, Sequence[str]]


RANKINGS_PER_INDEX = 64  # request shapes whose ranking an index keeps


class _Ranking:
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


def _fast_ranking(index: ClusterIndex, pod_claim: Claim, mode: Mode) -> tuple[_Ranking, dict[int, Answer]] | None:
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
    if not isinstance(ranking, _Ranking):
        ranking = _Ranking()
    index.rankings[request_id] = ranking
    index.rankings.move_to_end(request_id)
    while len(index.rankings) > RANKINGS_PER_INDEX:
        index.rankings.popitem(last=False)
    ranking.sync(index, answer_of)
    return ranking, table


def _fast_best(
    ranked: tuple[_Ranking, dict[int, Answer]],
    index: ClusterIndex,
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
) -> tuple[float, str, _Group] | None:
    """The walk over the request's ranking, without touching every class."""
    ranking, table = ranked
    best: tuple[float, str, _Group] | None = None
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
        best = _scan(index, (table[class_id], members), score, rules, allowed, best)
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


def place_indexed(
    registry: VendorRegistry,
    index: ClusterIndex,
    request: PodRequest,
    mode: Mode = Mode.DEFAULT,
    *,
    workload: tuple[WorkloadClass, ...] = (),
    explain: bool = False,
    allowed: Callable[[str], bool] | None = None,
    runners_up: int = 0,
) -> Decision:
    """The best node and devices for `request` among the index's nodes (`allowed`: a further node filter).

    `explain` lists every other node with why it lost; `runners_up` (without `explain`) lists only
    the best few other nodes that fit, as the first entries of the explanation would, at the cost
    of walking the ranking a little further.

    Raises RequestError(field, reason) when the request cannot be read."""
    pod_claim = claim(registry, request, mode, workload, cpu=index.reads.resources)
    rules = PodRules(request, registry.share_resources)
    ranked = None if explain else _fast_ranking(index, pod_claim, mode)
    groups: list[_Group] = []
    if ranked is None:
        groups = _groups(index, pod_claim, mode)
        best = _walk(index, groups, rules, allowed)
    else:
        best = _fast_best(ranked, index, rules, allowed)
    if best is None:
        groups = groups or _groups(index, pod_claim, mode)
        return _unschedulable(index, groups, rules, allowed, _explainer(pod_claim, mode) if explain else None)
    total, name, group = best
    fit = group[0]
    assert isinstance(fit, NodeFit)
    node = index.node(name)
    parts = dict(fit.choice.parts)
    parts.update(fit.score.parts)
    preference = total - fit.score.score
    if preference:
        parts["preference"] = preference
    device_request = pod_claim.request
    return Decision(
        node=name,
        devices=_with_uuids(fit.choice.assignments, node),
        score=round(total, 6),
        score_parts=parts,
        alternatives=(
            _alternatives(index, groups, rules, name, fit, total, _explainer(pod_claim, mode))
            if explain
            else _runners_up(index, _ordered(index, ranked, groups), rules, allowed, name, fit, total, runners_up)
            if runners_up > 0
            else ()
        ),
        candidates_considered=fit.choice.considered,  # the winner's search; the others' cost nothing new
        warnings=_all_warnings(index, groups) if explain else tuple(f"{name}: {w}" for w in fit.warnings),
        qos=device_request.qos if device_request is not None else "",
        app_class=device_request.app_class if device_request is not None else "",
    )


# --- answers per group ----------------------------------------------------------------------


def _groups(index: ClusterIndex, pod_claim: Claim, mode: Mode) -> list[_Group]:
    plugin, device_request = pod_claim.plugin, pod_claim.request
    if plugin is None or device_request is None:
        return [(NO_DEVICES, members) for _, members in index.classes()]
    request_id = request_id_of(plugin, device_request, mode)
    if device_request.reads_uuids:
        # The answer depends on the node's own UUIDs: one node, one answer.
        return [
            (outcome(plugin, device_request, _without_node_rules(node), mode, request_id), (node.name,))
            for node in index.nodes()
        ]
    table = _answer_table(index, request_id) if request_id is not None else None
    groups: list[_Group] = []
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


def _without_node_rules(node: NodeState) -> NodeState:
    """Readiness and cordon are node rules here, not the vendor's: the per-node answer ignores them."""
    if node.ready and not node.unschedulable:
        return node
    return msgspec.structs.replace(node, ready=True, unschedulable=False)


# --- ranking --------------------------------------------------------------------------------


def _walk(
    index: ClusterIndex,
    groups: list[_Group],
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
) -> tuple[float, str, _Group] | None:
    """The highest score + preference, ties to the first name, among nodes passing the node rules.

    Groups are taken best score first from a heap, so a decision that finds its node in the
    best group never orders the rest."""
    heap = [(-answer.score.score, i) for i, (answer, _) in enumerate(groups) if answer.__class__ is NodeFit]
    heapq.heapify(heap)
    best: tuple[float, str, _Group] | None = None
    ceiling = rules.max_preference
    while heap:
        negative, i = heapq.heappop(heap)
        score, group = -negative, groups[i]
        if best is not None and score + ceiling < best[0]:
            break  # taken best first: no later group can reach the best
        best = _scan(index, group, score, rules, allowed, best)
    return best


def _scan(
    index: ClusterIndex,
    group: _Group,
    score: float,
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
    best: tuple[float, str, _Group] | None,
) -> tuple[float, str, _Group] | None:
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


def _with_uuids(assignments: tuple[DeviceAssignment, ...], node: NodeState) -> tuple[DeviceAssignment, ...]:
    """The class answer's shares on this node's own devices (a class answer carries no UUIDs)."""
    uuids = {d.index: d.uuid for d in node.devices}
    return tuple(
        a if a.uuid == uuids.get(a.index, a.uuid) else msgspec.structs.replace(a, uuid=uuids.get(a.index, ""))
        for a in assignments
    )


# --- when nothing fits, and explanations ------------------------------------------------------


Explainer = Callable[[NodeState], str]


def _explainer(pod_claim: Claim, mode: Mode) -> Explainer:
    """A node's own reason for a device miss: its class answer names no UUIDs, the node's own does."""
    plugin, device_request = pod_claim.plugin, pod_claim.request

    def explain(node: NodeState) -> str:
        if plugin is None or device_request is None:
            return ""
        result = evaluate_node(plugin, device_request, _without_node_rules(node), mode)
        return result.unfit.reason if isinstance(result, NodeMiss) else ""

    return explain


OUTSIDE_DOMAIN = "node(s) were outside the gang's network domain"


def node_reasons(
    node: NodeState,
    answer: Answer,
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
    explainer: Explainer | None = None,
) -> tuple[list[str], str] | None:
    """Why the node cannot take the pod: kube-scheduler's summaries and the node's own words; None: it can."""
    if allowed is not None and not allowed(node.name):
        return [OUTSIDE_DOMAIN], "outside the gang's network domain"
    failure = rules.failure(node)
    if failure is not None:
        return failure, rules.in_words(failure)
    if isinstance(answer, NodeMiss):
        words = explainer(node) if explainer is not None else ""
        return [answer.unfit.summary], words or answer.unfit.reason
    return None


def _unschedulable(
    index: ClusterIndex,
    groups: list[_Group],
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
    explainer: Explainer | None,
) -> Decision:
    summaries: list[str] = []
    verdicts: list[NodeVerdict] = []
    for answer, members in groups:
        for name in members:
            reasons = node_reasons(index.node(name), answer, rules, allowed, explainer)
            if reasons is None:
                continue  # fits but lost to no one: cannot happen when nothing was found; kept safe
            summaries.extend(reasons[0])
            if explainer is not None:
                verdicts.append(NodeVerdict(node=name, fits=False, reason=reasons[1]))
    verdicts.sort(key=lambda v: v.node)
    return Decision(
        node=None,
        reason=fit_error_message(len(index), summaries, pre_filter_message=rules.compiled.pre_filter_reason),
        alternatives=tuple(verdicts),
    )


def _alternatives(
    index: ClusterIndex,
    groups: list[_Group],
    rules: PodRules,
    winner: str,
    best: NodeFit,
    total: float,
    explainer: Explainer,
) -> tuple[NodeVerdict, ...]:
    """Every other node: the ones that fit, best first, with why they lost; then the others, by name."""
    fits: list[NodeVerdict] = []
    misses: list[NodeVerdict] = []
    for answer, members in groups:
        for name in members:
            if name == winner:
                continue
            reasons = node_reasons(index.node(name), answer, rules, None, explainer)
            if reasons is not None:
                misses.append(NodeVerdict(node=name, fits=False, reason=reasons[1]))
                continue
            assert isinstance(answer, NodeFit)
            score = answer.score.score + rules.preference(index.node(name))
            mine = NodeScore(score=round(score, 6), parts=answer.score.parts)
            told = loser_reason(winner, NodeScore(score=round(total, 6), parts=best.score.parts), mine)
            fits.append(NodeVerdict(node=name, fits=True, score=mine.score, devices=answer.choice.devices, reason=told))
    fits.sort(key=lambda v: (-v.score, v.node))
    misses.sort(key=lambda v: v.node)
    return tuple(fits) + tuple(misses)


def _ordered(
    index: ClusterIndex, ranked: tuple[_Ranking, dict[int, Answer]] | None, groups: list[_Group]
) -> Iterator[tuple[float, _Group]]:
    """The fitting groups with their score, best first: from the ranking, or sorted from the groups."""
    if ranked is not None:
        ranking, table = ranked
        for negative, class_id in ranking.ranked:
            members = index.members(class_id)
            if members:
                yield -negative, (table[class_id], members)
        return
    fitting = [(-answer.score.score, i) for i, (answer, _) in enumerate(groups) if answer.__class__ is NodeFit]
    for negative, i in sorted(fitting):
        yield -negative, groups[i]


def _runners_up(
    index: ClusterIndex,
    ordered: Iterator[tuple[float, _Group]],
    rules: PodRules,
    allowed: Callable[[str], bool] | None,
    winner: str,
    best: NodeFit,
    total: float,
    count: int,
) -> tuple[NodeVerdict, ...]:
    """The `count` best other nodes that pass the node rules, by (-score, name), with why they lost.

    Scores are compared rounded, as the explanation shows and sorts them; rounding keeps order,
    so a group whose score + the highest preference cannot reach the last kept one ends the walk."""
    ceiling = rules.max_preference
    kept: list[tuple[float, str, NodeFit]] = []  # (-rounded total, name, answer), ascending
    for score, (answer, members) in ordered:
        reach = round(score + ceiling, 6)
        if len(kept) == count and -kept[-1][0] > reach:
            break
        assert isinstance(answer, NodeFit)
        names: Sequence[str] = members
        if rules.only_node is not None:
            names = (rules.only_node,) if rules.only_node in members else ()
        for name in names:
            last_total, last_name = -kept[-1][0] if kept else 0.0, kept[-1][1] if kept else ""
            if len(kept) == count and (last_total > reach or (last_total == reach and last_name < name)):
                break  # names come sorted: nobody later in this group gets in
            if name == winner or (allowed is not None and not allowed(name)):
                continue
            node = index.node(name)
            if rules.failure(node) is not None:
                continue
            entry = (-round(score + rules.preference(node), 6), name, answer)
            if len(kept) < count or entry[:2] < kept[-1][:2]:
                bisect.insort(kept, entry, key=lambda e: e[:2])
                del kept[count:]
    told = NodeScore(score=round(total, 6), parts=best.score.parts)
    verdicts = []
    for negative, name, answer in kept:
        mine = NodeScore(score=-negative, parts=answer.score.parts)
        reason = loser_reason(winner, told, mine)
        verdicts.append(
            NodeVerdict(node=name, fits=True, score=mine.score, devices=answer.choice.devices, reason=reason)
        )
    return tuple(verdicts)


def _all_warnings(index: ClusterIndex, groups: list[_Group]) -> tuple[str, ...]:
    """Every node's warnings, by node name (explanations only: it walks every node)."""
    by_name = {name: answer.warnings for answer, members in groups if answer.warnings for name in members}
    return tuple(f"{name}: {w}" for name in sorted(by_name) for w in by_name[name])


def clear() -> None:
    """Forget every class answer (tests start cold)."""
    _class_answers.clear()
