"""PodDisruptionBudgets as kube-scheduler's preemption reads them (filterPodsWithPDBViolation).

Each budget allows `status.disruptionsAllowed` more disruptions. Walking the
potential victims in the order given, a victim that a budget of its namespace
selects uses one of that budget's disruptions (unless the budget's
`disruptedPods` already names it: the API server counted it); a victim that
takes some budget below zero *violates* it. A budget with no selector or an
empty one selects nothing, and a pod without labels matches no budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.decide.preempt.model import DisruptionBudget, RunningPod
from schemas.events.network import LabelSelector, LabelSelectorRequirement


def _holds(requirement: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(requirement.key)
    match requirement.operator:
        case "In":
            return value is not None and value in requirement.values
        case "NotIn":
            return value is None or value not in requirement.values
        case "Exists":
            return value is not None
        case "DoesNotExist":
            return value is None
    return False  # an operator the API server refuses: a selector that selects nothing


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether the budget's selector selects these labels (nil or empty: nothing)."""
    if selector is None or (not selector.match_labels and not selector.match_expressions):
        return False
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(_holds(r, labels) for r in selector.match_expressions)


def split_by_violation(
    pods: Sequence[RunningPod], budgets: Sequence[DisruptionBudget]
) -> tuple[list[RunningPod], list[RunningPod]]:
    """(violating, not violating), each in the order given (stable, as upstream)."""
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[RunningPod] = []
    fine: list[RunningPod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, budget in enumerate(budgets):
                if budget.namespace != pod.namespace or not selects(budget.selector, pod.labels):
                    continue
                if pod.name in budget.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine
