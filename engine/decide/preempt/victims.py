"""The victims on one node (kube-scheduler's SelectVictimsOnNode, made device-aware).

kube's way, for a pod that asks no device:

    potential victims  the node's pods of strictly lower priority; none: "No preemption victims found"
    all of them gone   the preemptor must fit, else the node is no candidate (its reasons then)
    reprieve           in order: the pods whose eviction would violate a PodDisruptionBudget first, then
                       the others, each group most important first (higher priority, then earlier start);
                       a pod is put back when the preemptor still fits with it, else it is a victim

For a pod that asks for devices, kube's fit test is a count: any free devices
will do, so the reprieve order alone decides which devices are freed, and it
may free two GPUs on two NVLink quads where evicting two other pods frees one
whole quad. Here the pods holding devices on the node are decided first:

    the best link score   the preemptor's set score with every potential victim gone (more free
                          devices never lower it)
    holders' victims      among the subsets of the device holders whose eviction still gives that
                          score (every subset when there are at most EXACT_HOLDERS, else kube's
                          reprieve with "still that score" as the test), the one whose set breaks
                          the least idle link score (fewest broken sets), then the one that keeps
                          the pods the reprieve order would keep (more important first); tried in
                          that order, so that the first to break nothing ends the search
    the others            kube's reprieve over the remaining pods, the holders' victims gone
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from engine.core.model import NodeState
from engine.decide.preempt.budgets import split_by_violation
from engine.decide.preempt.model import Candidate, DisruptionBudget, RunningPod
from engine.decide.preempt.room import NO_VICTIMS, Fit, Room

EXACT_HOLDERS = 10  # device holders on one node up to which every subset of them is tried (2^10 fits)
_SCORE_EPSILON = 1e-9


def start_of(pod: RunningPod) -> float:
    """kube's GetPodStartTime: a pod not started yet counts as starting now, the latest."""
    return math.inf if pod.start_time is None else pod.start_time


def importance_order(pods: Sequence[RunningPod]) -> list[RunningPod]:
    """Most important first (kube's MoreImportantPod: higher priority, then earlier start); then by name,
    so that the same input always gives the same order."""
    return sorted(pods, key=lambda p: (-p.priority, start_of(p), p.key))


def _reprieve(
    room: Room,
    node: NodeState,
    order: Sequence[RunningPod],
    gone_anyway: Sequence[RunningPod],
    accept: Callable[[Fit], bool],
) -> list[RunningPod]:
    """kube's reprieve: every pod of `order` gone, each put back in turn when the preemptor still fits
    (and `accept`s the fit); those that cannot be put back are the victims, in `order`."""
    gone = {p.key: p for p in (*gone_anyway, *order)}
    victims: list[RunningPod] = []
    for pod in order:
        del gone[pod.key]
        result = room.fit(node, gone.values())
        if isinstance(result, Fit) and accept(result):
            continue
        gone[pod.key] = pod
        victims.append(pod)
    return victims


def _holders_victims(
    room: Room, node: NodeState, holders: Sequence[RunningPod], others: Sequence[RunningPod], best: Fit
) -> list[RunningPod]:
    """The device holders to evict: the preemptor's best set score, the least broken idle score, then the
    reprieve order's choice (see the module docstring)."""

    def best_score(fit: Fit) -> bool:
        return fit.set_score >= best.set_score - _SCORE_EPSILON

    if len(holders) > EXACT_HOLDERS:
        return _reprieve(room, node, holders, others, best_score)
    count = len(holders)
    chosen: tuple[float, int] | None = None
    chosen_set: list[RunningPod] = []
    # Subsets in the reprieve order's preference: holder i is evicted when bit count-1-i of `rank` is set, so a
    # smaller rank keeps the more important pods. The broken idle score is a sum of pair scores, never below 0:
    # the first subset of the best set score that breaks none is the answer, and the search stops there.
    for rank in range(1 << count):
        subset = [p for i, p in enumerate(holders) if rank >> (count - 1 - i) & 1]
        result = room.fit(node, (*subset, *others))
        if not isinstance(result, Fit) or not best_score(result):
            continue
        key = (result.remainder_loss, rank)
        if chosen is None or key < chosen:
            chosen, chosen_set = key, subset
            if result.remainder_loss <= 0.0:
                break
    return chosen_set


def count_only_victims(
    room: Room, node: NodeState, running: Sequence[RunningPod], priority: int, budgets: Sequence[DisruptionBudget]
) -> list[RunningPod]:
    """kube's own reprieve on the node, whatever devices it frees (for the explanation of a device pod)."""
    potential = [p for p in running if p.priority < priority]
    violating, fine = split_by_violation(importance_order(potential), budgets)
    return importance_order(_reprieve(room, node, [*violating, *fine], (), lambda _: True))


def select_victims(
    room: Room, node: NodeState, running: Sequence[RunningPod], priority: int, budgets: Sequence[DisruptionBudget]
) -> Candidate | list[str]:
    """The node as a candidate (its victims, most important first), or kube's reasons it is none."""
    potential = [p for p in running if p.priority < priority]
    if not potential:
        return [NO_VICTIMS]
    everything_gone = room.fit(node, potential)
    if not isinstance(everything_gone, Fit):
        return everything_gone
    violating, fine = split_by_violation(importance_order(potential), budgets)
    order = [*violating, *fine]
    held = {a.pod_uid for a in node.allocations}
    holders = [p for p in order if p.holder and p.holder in held] if room.wants_devices else []
    if holders:
        others = [p for p in order if p not in holders]
        evicted = _holders_victims(room, node, holders, others, everything_gone)
        victims = evicted + _reprieve(room, node, others, evicted, lambda _: True)
    else:
        victims = _reprieve(room, node, order, (), lambda _: True)
    final = room.fit(node, victims)
    assert isinstance(final, Fit)  # the reprieve only keeps pods with which the preemptor fits
    violators = {p.key for p in violating}
    return Candidate(
        node=node.name,
        victims=tuple(importance_order(victims)),
        budget_violations=sum(1 for p in victims if p.key in violators),
        set_score=final.set_score,
        remainder_loss=final.remainder_loss,
    )
