"""Events about disruption: disruption.budgets (PodDisruptionBudgets, as preemption reads them)."""

from __future__ import annotations

from schemas.events.base import Event
from schemas.events.network import LabelSelector

# --- disruption.budgets (key = "<namespace>/<name>") ---------------------------------------


class DisruptionBudgetEvent(Event, frozen=True, kw_only=True):
    """A PodDisruptionBudget: the pods it selects in its namespace and the disruptions it still allows
    (status.disruptionsAllowed, as kube-scheduler reads it), or deleted.

    A budget with no selector, or an empty one, selects no pod (policy/v1)."""

    namespace: str
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    disrupted_pods: tuple[str, ...] = ()  # status.disruptedPods: pod names already counted
    deleted: bool = False
    observed_at: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
