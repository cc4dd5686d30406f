"""Preemption for one pod over the cluster: eligibility, candidate nodes, the node chosen, in kube's words.

eligible        preemptionPolicy Never never preempts ("not eligible due to preemptionPolicy=Never.");
                a pod nominated to a node where a lower-priority pod is terminating by preemption
                waits for it ("not eligible due to a terminating pod on the nominated node."), unless
                removing pods cannot help it on that node any more
candidates      the nodes whose failure removing pods can cure (room.py), with their victims
                (victims.py); a node that cannot be cured says "Preemption is not helpful for
                scheduling"; only the nodes that can still beat the best so far are tried
                (search.py), with the answer trying every node would give
the node        pickOneNodeForPreemption's order: fewest PodDisruptionBudget violations, the lowest
                highest victim priority, the smallest sum of victim priorities, the fewest victims,
                the latest earliest start among the highest-priority victims; then (ours) the best
                link score and the least broken idle score the preemptor gets there, then the name
none            "preemption: 0/N nodes are available: ..." with each node's reasons, counted as
                the scheduler's own FitError counts them
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.core.model import Decision, NodeState, Snapshot
from engine.decide.kube.messages import fit_error_message
from engine.decide.preempt.budgets import split_by_violation
from engine.decide.preempt.model import (
    PREEMPT_NEVER,
    Candidate,
    CountOnly,
    DisruptionBudget,
    Preemption,
    Preemptor,
    RunningPod,
    Victim,
)
from engine.decide.preempt.room import Fit, Room, without
from engine.decide.preempt.search import PodsByNode, every_candidate, node_order_key, shaped_candidates
from engine.decide.preempt.victims import count_only_victims, importance_order

NEVER_REASON = "preemption: not eligible due to preemptionPolicy=Never."
WAITING_REASON = "preemption: not eligible due to a terminating pod on the nominated node."


def _waits(room: Room, preemptor: Preemptor, pods: PodsByNode) -> bool:
    """PodEligibleToPreemptOthers' second rule: nominated, and a lower-priority pod there is terminating."""
    nominated = pods.nodes.get(preemptor.nominated_node) if preemptor.nominated_node else None
    if nominated is None or room.unresolvable(nominated) is not None:
        return False
    return any(p.priority < preemptor.priority and p.terminating_by_preemption for p in pods.pods_on(nominated.name))


def preempt(
    room: Room,
    snapshot: Snapshot,
    preemptor: Preemptor,
    running: Sequence[RunningPod],
    budgets: Sequence[DisruptionBudget],
    place_on: Callable[[NodeState], Decision],
    pods: PodsByNode | None = None,
    *,
    every_node: bool = False,
) -> Preemption:
    """Where `preemptor` runs by evicting lower-priority pods, and which; `place_on` places it on a node
    (the node without its victims) for its devices and score. `pods`: the running pods by node (kept by
    the caller for these very snapshot and pods); `every_node`: try every node (search.py), not only
    those that can still win."""
    if preemptor.policy == PREEMPT_NEVER:
        return Preemption(node=None, reason=NEVER_REASON)
    if pods is None or not pods.matches(snapshot, running):
        pods = PodsByNode(snapshot, running)
    room.share_requests(pods.requests_milli)  # parsed once while the running pods stay the same
    nodes = pods.nodes
    if _waits(room, preemptor, pods):
        return Preemption(node=None, reason=WAITING_REASON)
    candidates = None if every_node else shaped_candidates(room, pods, preemptor.priority, budgets)
    if candidates is None:  # every node tried, or none is a candidate: its reasons say why, node by node
        candidates, reasons = every_candidate(room, nodes, pods, preemptor.priority, budgets)
        if not candidates:
            return Preemption(node=None, reason="preemption: " + fit_error_message(len(nodes), reasons))
    candidates.sort(key=lambda c: (node_order_key(c), c.node))
    best = candidates[0]
    decision = place_on(without(nodes[best.node], best.victims))
    mine = pods.pods_on(best.node)
    return Preemption(
        node=best.node,
        victims=_explained(room, preemptor, nodes[best.node], best, budgets, mine),
        budget_violations=best.budget_violations,
        decision=decision,
        candidates=tuple(candidates),
        count_only=_count_only(room, nodes[best.node], best, mine, preemptor.priority, budgets),
    )


def _count_only(
    room: Room,
    node: NodeState,
    chosen: Candidate,
    running: Sequence[RunningPod],
    priority: int,
    budgets: Sequence[DisruptionBudget],
) -> CountOnly | None:
    """kube's choice on the chosen node for a device pod, when it differs from ours."""
    if not room.wants_devices:
        return None
    theirs = count_only_victims(room, node, running, priority, budgets)
    if {p.key for p in theirs} == {p.key for p in chosen.victims}:
        return None
    fit = room.fit(node, theirs)
    assert isinstance(fit, Fit)  # kube's reprieve keeps only pods with which the preemptor fits
    return CountOnly(victims=tuple(p.key for p in theirs), set_score=fit.set_score, set_score_chosen=chosen.set_score)


def _explained(
    room: Room,
    preemptor: Preemptor,
    node: NodeState,
    chosen: Candidate,
    budgets: Sequence[DisruptionBudget],
    running: Sequence[RunningPod],
) -> tuple[Victim, ...]:
    """Each victim with why: its priority below the preemptor's, a budget it violates, the devices it frees."""
    potential = importance_order([p for p in running if p.priority < preemptor.priority])
    violating = {p.key for p in split_by_violation(potential, budgets)[0]}
    fit = room.fit(node, chosen.victims)
    taken = set(fit.devices) if isinstance(fit, Fit) else set()
    out: list[Victim] = []
    for pod in chosen.victims:
        why = [f"priority {pod.priority} < {preemptor.priority}"]
        freed = sorted({a.index for a in node.allocations if pod.holder and a.pod_uid == pod.holder} & taken)
        if freed:
            why.append(f"frees device(s) {', '.join(map(str, freed))} of the pod's set")
        if pod.key in violating:
            why.append("its PodDisruptionBudget allows no more disruptions")
        out.append(Victim(pod=pod.key, priority=pod.priority, violates_budget=pod.key in violating, why="; ".join(why)))
    return tuple(out)
