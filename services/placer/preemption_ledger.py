"""The placer view's part for preemption: nominations, PodDisruptionBudgets, the pods running.

Nominations ride on the placements, bindings and pods.lifecycle topics (preemption.py's `Nominations`);
budgets come on disruption.budgets. The view's rows (view.py's VIEW_TOPICS) call these
handlers, which then hand the event on to the pod ledger.
"""

from __future__ import annotations

import msgspec

from schemas.events import BindingEvent, DisruptionBudgetEvent, LifecyclePhase, PlacementEvent, PodLifecycleEvent
from services.placer.holdings import HoldingState, ViewChange
from services.placer.pod_ledger import PodLedger
from services.placer.preemption import Nominations


class PreemptionLedger(PodLedger):
    """The pod ledger, with the nominations its events carry and the disruption budgets known."""

    def __init__(self) -> None:
        super().__init__()
        self.nominations = Nominations()  # pods nominated by a preemption, holding room (preemption.py)
        self._budgets: dict[str, DisruptionBudgetEvent] = {}  # PodDisruptionBudgets by namespace/name

    def assume(self, placement: PlacementEvent) -> None:
        self.nominations.apply_placement(placement)
        super().assume(placement)

    def _apply_decision(self, event: PlacementEvent) -> ViewChange:
        self.nominations.apply_placement(event)
        return self._apply_placement(event)

    def _apply_answer(self, event: BindingEvent) -> ViewChange:
        self.nominations.apply_binding(event)
        return self._apply_binding(event)

    def _apply_pod(self, event: PodLifecycleEvent) -> ViewChange:
        self.nominations.apply_lifecycle(event)
        facts = self._pods.get(event.uid)
        decided_only = facts is not None and facts.lifecycle is None and bool(facts.outstanding())
        change = self._apply_lifecycle(event)
        if decided_only and event.phase is LifecyclePhase.BOUND and event.node:
            return msgspec.structs.replace(change, reported=True)
        return change

    def unreported_on(self, node: str, *, but: str) -> list[str]:
        """Pods decided onto `node` (assumed or confirmed) that the cluster has not reported there yet,
        `but` aside: their devices count as held, but preemption cannot weigh them as victims."""
        return sorted(
            h.pod_uid
            for facts in self._pods_on(node)
            for h in facts.holdings()
            if h.node == node and h.state is not HoldingState.BOUND and h.pod_uid != but
        )

    def _pod_gone(self, uid: str) -> ViewChange:
        self.nominations.forget(uid)
        return self._lifecycle_gone(uid)

    def _apply_budget(self, event: DisruptionBudgetEvent) -> ViewChange:
        before = self._budgets.pop(event.key, None)
        if not event.deleted:
            self._budgets[event.key] = event
        # a budget allowing more disruptions may let a parked pod preempt
        return ViewChange(capacity_grew=not event.deleted and before != event)

    def _budget_gone(self, key: str) -> ViewChange:
        return ViewChange(capacity_grew=self._budgets.pop(key, None) is not None)

    def budgets(self) -> tuple[DisruptionBudgetEvent, ...]:
        return tuple(self._budgets[key] for key in sorted(self._budgets))

    def running_pods(self) -> tuple[PodLifecycleEvent, ...]:
        """Every pod the cluster reports bound to a node, of any scheduler, by uid: preemption's candidates."""
        found = []
        for uid in sorted(self._pods):
            bound = self._pods[uid].lifecycle
            if bound is not None and bound.phase is LifecyclePhase.BOUND and bound.node:
                found.append(bound)
        return tuple(found)
