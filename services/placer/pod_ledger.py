"""The placer view's pods: every pod it heard of, what each holds where, and the deleted ones.

Who holds which device is derived per pod from its facts (holdings.py); the ledger keeps
those facts by uid, the pods on each node, and marks the nodes a change touched (`_dirty`) so
that the view rebuilds only those in the engine's index.
"""

from __future__ import annotations

from collections import OrderedDict

from schemas.events import (
    BindingEvent,
    BindingOutcome,
    LifecyclePhase,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from services.placer.holdings import (
    DROPPING_OUTCOMES,
    NO_CHANGE,
    Holding,
    PodFacts,
    ViewChange,
    devices_freed,
)

# Deleted pods remembered (uid only) so that late events about them change nothing; the oldest go first.
DELETED_BOUND = 200_000


class PodLedger:
    """Pods by uid from pods.lifecycle, placements and bindings, in whatever order they arrive."""

    def __init__(self) -> None:
        self._pods: dict[str, PodFacts] = {}
        self._deleted: OrderedDict[str, None] = OrderedDict()  # uids of deleted pods, bounded
        self._on_node: dict[str, set[str]] = {}  # node -> uids of pods holding devices or resources there
        self._dirty: set[str] = set()  # nodes whose state changed since the index was last rebuilt

    def assume(self, placement: PlacementEvent) -> None:
        """Record our own PLACED decision at once, before the placements topic echoes it."""
        self._apply_placement(placement)

    def retract(self, placement: PlacementEvent) -> None:
        """Take back our own decision that could not be published (nobody else saw it)."""
        facts = self._pods.get(placement.uid)
        if facts is not None and placement.decision_id not in facts.outcomes:
            before = facts.nodes()
            facts.placements.pop(placement.decision_id, None)
            self._moved(placement.uid, facts, before)

    def _apply_lifecycle(self, event: PodLifecycleEvent) -> ViewChange:
        if event.uid in self._deleted:
            return NO_CHANGE  # deletion is final; a late "bound" is an older state
        facts = self._facts(event.uid)
        held_before = facts.holdings()
        before = facts.nodes()
        placed_before = facts.placed_on()
        if event.phase is LifecyclePhase.DELETED:
            facts.lifecycle = event
            self._moved(event.uid, facts, before)
            self._forget(event.uid)
            freed = bool(held_before) or bool(before)
            devices = devices_freed(held_before, [])
            moved = placed_before is not None
            return ViewChange(capacity_grew=freed, devices_freed=devices, settled=(event.uid,), pods_moved=moved)
        facts.lifecycle = event
        self._moved(event.uid, facts, before)
        freed = devices_freed(held_before, facts.holdings())
        moved = placed_before != facts.placed_on()
        return ViewChange(capacity_grew=freed, devices_freed=freed, settled=(event.uid,), pods_moved=moved)

    def _apply_placement(self, event: PlacementEvent) -> ViewChange:
        if event.outcome is not PlacementOutcome.PLACED or event.uid in self._deleted:
            return NO_CHANGE
        facts = self._facts(event.uid)
        if event.decision_id in facts.placements:
            return NO_CHANGE
        before = facts.nodes()
        facts.placements[event.decision_id] = event
        self._moved(event.uid, facts, before)
        return NO_CHANGE

    def _apply_binding(self, event: BindingEvent) -> ViewChange:
        if event.outcome not in (BindingOutcome.BOUND, *DROPPING_OUTCOMES) or event.uid in self._deleted:
            return NO_CHANGE
        facts = self._facts(event.uid)
        if event.decision_id in facts.outcomes:
            return NO_CHANGE  # a duplicate answer
        if event.outcome is BindingOutcome.BOUND:
            facts.outcomes[event.decision_id] = event.outcome
            return NO_CHANGE  # confirms a holding: nothing freed
        held_before = facts.holdings()
        before = facts.nodes()
        placed_before = facts.placed_on()
        facts.outcomes[event.decision_id] = event.outcome
        self._moved(event.uid, facts, before)
        freed = devices_freed(held_before, facts.holdings())
        settled = facts.deleted or facts.lifecycle is not None
        moved = placed_before != facts.placed_on()
        return ViewChange(
            capacity_grew=freed, devices_freed=freed, dropped=() if settled else (event,), pods_moved=moved
        )

    def _lifecycle_gone(self, uid: str) -> ViewChange:
        # The pod's record was compacted away after its deletion: treat as deleted.
        return self._apply_lifecycle(PodLifecycleEvent(uid=uid, namespace="", name="", phase=LifecyclePhase.DELETED))

    def _facts(self, uid: str) -> PodFacts:
        facts = self._pods.get(uid)
        if facts is None:
            facts = self._pods[uid] = PodFacts()
        return facts

    def _moved(self, uid: str, facts: PodFacts, before: set[str]) -> None:
        """The pod's nodes changed (or what it holds on them): mark them for a rebuild."""
        after = facts.nodes()
        for node in before - after:
            on = self._on_node.get(node)
            if on is not None:
                on.discard(uid)
                if not on:
                    del self._on_node[node]
        for node in after:
            self._on_node.setdefault(node, set()).add(uid)
        self._dirty.update(before)
        self._dirty.update(after)

    def _forget(self, uid: str) -> None:
        """A deleted pod: keep only its uid (bounded), so memory does not grow with every pod ever seen."""
        self._pods.pop(uid, None)
        self._deleted[uid] = None
        while len(self._deleted) > DELETED_BOUND:
            self._deleted.popitem(last=False)

    # --- reading ---------------------------------------------------------------------------

    def holdings_of(self, uid: str) -> list[Holding]:
        facts = self._pods.get(uid)
        return facts.holdings() if facts is not None else []

    def is_deleted(self, uid: str) -> bool:
        return uid in self._deleted

    def running_node(self, uid: str) -> str:
        """The node the cluster reports the pod bound to ("" when not bound)."""
        facts = self._pods.get(uid)
        if facts is None or facts.lifecycle is None or facts.deleted:
            return ""
        return facts.lifecycle.node

    def dropped_decisions(self, uid: str) -> int:
        """How many decisions for this pod the binder rejected (CONFLICT or FAILED)."""
        facts = self._pods.get(uid)
        if facts is None:
            return 0
        return sum(1 for outcome in facts.outcomes.values() if outcome in DROPPING_OUTCOMES)

    def holdings(self) -> list[Holding]:
        return [h for facts in self._pods.values() for h in facts.holdings()]

    def _pods_on(self, node: str) -> list[PodFacts]:
        """The facts of the pods holding devices or resources on `node`, by uid."""
        on_node = (self._pods.get(uid) for uid in sorted(self._on_node.get(node, ())))
        return [facts for facts in on_node if facts is not None]
