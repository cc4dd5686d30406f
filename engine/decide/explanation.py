"""Why the other nodes lost or cannot host the pod: kube-scheduler's counted reasons and each node's own words.

Built only when asked (`explain`, `runners_up`) or when nothing fits.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence

from engine.cluster.index import ClusterIndex
from engine.core.model import Decision, Mode, NodeState, NodeVerdict
from engine.decide.claim import Claim
from engine.decide.kube.messages import fit_error_message
from engine.decide.node_rules import PodRules
from engine.decide.ranking import (
    Answer,
    Group,
    Ranking,
    without_node_rules,
)
from engine.node.answer import NodeAnswers, NodeFit, NodeMiss
from engine.node.explain import loser_reason
from engine.node.vendor import NodeScore

Explainer = Callable[[NodeState], str]


def explainer(answers: NodeAnswers, pod_claim: Claim, mode: Mode) -> Explainer:
    """A node's own reason for a device miss: its class answer names no UUIDs, the node's own does."""
    plugin, device_request = pod_claim.plugin, pod_claim.request

    def explain(node: NodeState) -> str:
        if plugin is None or device_request is None:
            return ""
        result = answers.named(plugin, device_request, without_node_rules(node), mode)
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


def unschedulable_decision(
    index: ClusterIndex,
    groups: list[Group],
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
                verdicts.append(NodeVerdict(node=name, fits=False, reason=reasons[1], reasons=tuple(reasons[0])))
    verdicts.sort(key=lambda v: v.node)
    return Decision(
        node=None,
        reason=fit_error_message(len(index), summaries, pre_filter_message=rules.compiled.pre_filter_reason),
        alternatives=tuple(verdicts),
    )


def every_alternative(
    index: ClusterIndex,
    groups: list[Group],
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
                misses.append(NodeVerdict(node=name, fits=False, reason=reasons[1], reasons=tuple(reasons[0])))
                continue
            assert isinstance(answer, NodeFit)
            score = answer.score.score + rules.preference(index.node(name))
            mine = NodeScore(score=round(score, 6), parts=answer.score.parts)
            told = loser_reason(winner, NodeScore(score=round(total, 6), parts=best.score.parts), mine)
            fits.append(NodeVerdict(node=name, fits=True, score=mine.score, devices=answer.choice.devices, reason=told))
    fits.sort(key=lambda v: (-v.score, v.node))
    misses.sort(key=lambda v: v.node)
    return tuple(fits) + tuple(misses)


def fitting_in_order(
    index: ClusterIndex, ranked: tuple[Ranking, dict[int, Answer]] | None, groups: list[Group]
) -> Iterator[tuple[float, Group]]:
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


def best_runners_up(
    index: ClusterIndex,
    ordered: Iterator[tuple[float, Group]],
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


def all_warnings(index: ClusterIndex, groups: list[Group]) -> tuple[str, ...]:
    """Every node's warnings, by node name (explanations only: it walks every node)."""
    by_name = {name: answer.warnings for answer, members in groups if answer.warnings for name in members}
    return tuple(f"{name}: {w}" for name in sorted(by_name) for w in by_name[name])
