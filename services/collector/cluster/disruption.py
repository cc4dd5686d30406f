"""PodDisruptionBudgets (policy/v1) -> disruption.budgets: what preemption must respect.

kube-scheduler reads a budget's namespace, selector and status.disruptionsAllowed (and
status.disruptedPods, the evictions already counted); so does the placer.
"""

from __future__ import annotations

import msgspec

from schemas import topics
from schemas.events import DisruptionBudgetEvent
from services.collector.cluster import objects as obj
from services.collector.cluster.trackers import KeyedTracker, Publication
from services.collector.cluster.translate import Problem, label_selector


class BudgetSpec(msgspec.Struct, kw_only=True):
    selector: obj.LabelSelector | None = None


class BudgetStatus(msgspec.Struct, kw_only=True, rename="camel"):
    disruptions_allowed: int = 0
    disrupted_pods: dict[str, str] = {}


class PodDisruptionBudget(msgspec.Struct, kw_only=True):
    metadata: obj.ObjectMeta = msgspec.field(default_factory=obj.ObjectMeta)
    spec: BudgetSpec = msgspec.field(default_factory=BudgetSpec)
    status: BudgetStatus = msgspec.field(default_factory=BudgetStatus)


def budget_key(budget: PodDisruptionBudget) -> str:
    return f"{budget.metadata.namespace}/{budget.metadata.name}"


def budget_event(budget: PodDisruptionBudget, observed_at: float) -> tuple[DisruptionBudgetEvent, list[Problem]]:
    """The budget as preemption reads it (a budget the controller has not counted yet allows nothing)."""
    selector = budget.spec.selector
    event = DisruptionBudgetEvent(
        namespace=budget.metadata.namespace,
        name=budget.metadata.name,
        selector=label_selector(selector) if selector is not None else None,
        disruptions_allowed=max(budget.status.disruptions_allowed, 0),
        disrupted_pods=tuple(sorted(budget.status.disrupted_pods)),
        observed_at=observed_at,
    )
    return event, []


def budget_tracker() -> KeyedTracker[PodDisruptionBudget, DisruptionBudgetEvent]:
    def on_gone(key: str, last: DisruptionBudgetEvent, now: float) -> list[Publication]:
        deleted = msgspec.structs.replace(last, deleted=True, observed_at=now)
        return [
            Publication(topic=topics.DISRUPTION_BUDGETS.name, key=key, event=deleted),
            Publication(topic=topics.DISRUPTION_BUDGETS.name, key=key, event=None),
        ]

    return KeyedTracker(budget_event, budget_key, on_gone, topics.DISRUPTION_BUDGETS.name)
