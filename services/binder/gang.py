"""A gang's decision, all or nothing: every member checked before any is bound.

The placer publishes one GangPlacementEvent per gang, so the binder holds the
whole decision before it binds anything. Then:

1. Every member is checked without binding: a valid placement, the device
   ledger (members' devices are held one after another, so two members never
   get the same device), the Node's device count, and the pod itself (still
   pending with the expected uid: from the watch's view, else read).
   If any member fails, no member is bound, every hold is put back, and every
   member is reported (its own reason, or the failing member's), so the
   placer re-plans the whole gang.
2. Every member is bound (one request each, concurrently). Once one member
   is bound the gang is committed, so a member whose binding failed for a
   while only (`BindResult.retryable`: retries spent on API faults, HAMi's
   node lock held by another scheduler) is bound again, its devices still
   held, up to BIND_ROUNDS tries in all: given up, its devices would go to the
   next pod and the gang stay short. A member still not bound then (its pod
   was deleted meanwhile, the API server keeps refusing) is reported as it
   ended while the members bound stay BOUND: a bound pod cannot be unbound,
   and the placer places the replacement near them. The ledger keeps no hold
   of a member not bound.

An UNSCHEDULABLE decision: every member gets PodScheduled=False and a
FailedScheduling Event with the reason, naming why each tier of the network
tree was refused (the decision's `refused_tiers`), and is reported UNSCHEDULABLE.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kubernetes_asyncio.client.exceptions import ApiException
from opentelemetry import trace

from schemas import topics
from schemas.events import BindingOutcome, GangPlacementEvent, PlacementEvent, PlacementOutcome
from services.binder.apply import BindResult, api_error_text
from services.binder.handler import (
    BindingSteps,
    PlacementMessage,
    Producer,
    binding_event,
    mark_span,
    record_outcome,
)
from services.binder.ledger import HoldTicket
from services.binder.outcome import PodStanding, PodView, judge_pod, outcome_of
from services.binder.retry import RetriesExhausted

GANG_SPAN = "binder.bind_gang"
# Binding tries in all for a member whose gang-mates are bound (each try a whole retry budget).
BIND_ROUNDS = 3

Results = list[tuple[PlacementEvent, BindResult]]

log = logging.getLogger(__name__)


def unplaced_reason(member: PlacementEvent, gang: GangPlacementEvent) -> str:
    """The member's reason, with every refused tier the gang's decision carries that it does not name yet
    (the placer's reason names them; one from elsewhere, or cut short, may not): a user sees why no tier took it."""
    reason = member.reason or gang.reason
    missing = [refusal.text() for refusal in gang.refused_tiers if refusal.text() not in reason]
    return "; ".join([reason, *missing]) if reason else "; ".join(missing)


class _Checked:
    """What the checks found for one member."""

    def __init__(self, member: PlacementEvent) -> None:
        self.member = member
        self.known: PodView | None = None
        self.already_bound: BindResult | None = None  # bound here by an earlier copy of this decision
        self.ticket: HoldTicket | None = None  # while the member's devices are held for its bind


class GangHandler:
    def __init__(
        self,
        *,
        steps: BindingSteps,
        producer: Producer,
        tracer: trace.Tracer | None = None,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._steps = steps
        self._producer = producer
        self._tracer = tracer or trace.get_tracer("topoplace.binder")
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._gang_locks: dict[str, asyncio.Lock] = {}  # copies of one gang's decision, one at a time

    async def __call__(self, message: PlacementMessage) -> None:
        gang = message.event
        if not isinstance(gang, GangPlacementEvent):
            raise TypeError(f"value: expected a GangPlacementEvent, got {type(gang).__name__}")
        started = self._monotonic()
        with self._tracer.start_as_current_span(
            GANG_SPAN,
            context=message.trace_context,
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "gang": gang.name,
                "decision_id": gang.decision_id,
                "members": len(gang.members),
                "hypernode": gang.hypernode,
            },
        ) as span:
            results = await self._settle_alone(gang)
            outcomes = sorted({r.outcome.value for _, r in results})
            span.set_attribute("outcome", ",".join(outcomes))
            if any(r.outcome is BindingOutcome.FAILED for _, r in results):
                span.set_status(trace.Status(trace.StatusCode.ERROR, "a member failed"))
            finished_at = self._wall_clock()
            for member, result in results:
                with self._tracer.start_as_current_span(
                    "binder.bind_member",
                    attributes={"pod": f"{member.namespace}/{member.name}", "pod.uid": member.uid, "node": member.node},
                ) as member_span:
                    mark_span(member_span, result)
                    await self._producer.send(topics.BINDINGS, member.uid, binding_event(member, result, finished_at))
        seconds = self._monotonic() - started
        for member, result in results:
            self._steps.tell_pod(member, result)
            record_outcome(member, result, seconds)

    async def _settle_alone(self, gang: GangPlacementEvent) -> Results:
        lock = self._gang_locks.setdefault(gang.name, asyncio.Lock())
        try:
            async with lock:
                return await self._settle(gang)
        finally:
            if not lock.locked() and self._gang_locks.get(gang.name) is lock:
                del self._gang_locks[gang.name]

    async def _settle(self, gang: GangPlacementEvent) -> Results:
        placed = [m.outcome is PlacementOutcome.PLACED for m in gang.members]
        if gang.outcome is PlacementOutcome.UNSCHEDULABLE or not any(placed):
            return [
                (m, BindResult(outcome=BindingOutcome.UNSCHEDULABLE, reason=unplaced_reason(m, gang), attempts=0))
                for m in gang.members
            ]
        if not all(placed):
            at = placed.index(False)
            reason = f"invalid placement: gang {gang.name}: members[{at}].outcome is unschedulable in a placed decision"
            return [(m, BindResult(outcome=BindingOutcome.FAILED, reason=reason, attempts=0)) for m in gang.members]

        checked = [_Checked(m) for m in gang.members]
        failures: dict[str, BindResult] = {}
        try:
            for entry in checked:
                failure = await self._check(entry)
                if failure is not None:
                    failures[entry.member.uid] = failure
            if failures:
                return self._nothing_bound(gang, checked, failures)
            return await self._bind_all(checked)
        except BaseException:
            self._put_back(checked)
            raise

    async def _check(self, entry: _Checked) -> BindResult | None:
        member = entry.member
        refusal = self._steps.refusal(member, await self._steps.look_up_pod(member))
        if refusal is not None:
            return refusal
        # Held now, so the next member's ledger check sees this member's devices.
        entry.ticket = self._steps.hold(member)
        known = self._steps.known_pod(member.uid)
        if known is None:
            # The watch has not seen this pod (or there is no watch): ask the server.
            try:
                known = await self._steps.binder.current_pod(member.namespace, member.name)
            except (ApiException, RetriesExhausted) as exc:
                error = api_error_text(exc) if isinstance(exc, ApiException) else str(exc)
                return BindResult(outcome=BindingOutcome.FAILED, reason=f"cannot read the pod: {error}")
        entry.known = known
        judgement = judge_pod(known, member)
        if judgement.standing is PodStanding.BOUND_HERE:
            entry.already_bound = BindResult(outcome=BindingOutcome.BOUND, reason=judgement.reason, attempts=0)
            return None
        settled = outcome_of(judgement.standing)
        if settled is not None:
            return BindResult(outcome=settled, reason=judgement.reason, attempts=0)
        return None

    def _nothing_bound(
        self, gang: GangPlacementEvent, checked: list[_Checked], failures: dict[str, BindResult]
    ) -> Results:
        self._put_back(checked)
        first = next(e.member for e in checked if e.member.uid in failures)
        why = f"gang {gang.name} not bound: member {first.namespace}/{first.name}: {failures[first.uid].reason}"
        results: Results = []
        for entry in checked:
            uid = entry.member.uid
            if uid in failures:
                results.append((entry.member, failures[uid]))
            elif entry.already_bound is not None:
                results.append((entry.member, entry.already_bound))  # bound before: it stays bound
            else:
                results.append((entry.member, BindResult(outcome=BindingOutcome.CONFLICT, reason=why, attempts=0)))
        return results

    async def _bind_all(self, checked: list[_Checked]) -> Results:
        for entry in checked:
            if entry.already_bound is not None:
                self._settle_member(entry, entry.already_bound)
        to_bind = [e for e in checked if e.already_bound is None]
        bound: dict[str, BindResult] = {}
        for round_ in range(1, BIND_ROUNDS + 1):
            answers = await asyncio.gather(
                *(self._steps.binder.bind(e.member, e.known) for e in to_bind), return_exceptions=True
            )
            for entry, answer in zip(to_bind, answers, strict=True):
                if isinstance(answer, BaseException):
                    if not isinstance(answer, Exception):
                        raise answer
                    answer = BindResult(outcome=BindingOutcome.FAILED, reason=f"unexpected error: {answer!r}")
                bound[entry.member.uid] = answer
            committed = any(e.already_bound is not None for e in checked) or any(
                r.outcome is BindingOutcome.BOUND for r in bound.values()
            )
            again = [e for e in to_bind if bound[e.member.uid].retryable] if committed else []
            if round_ == BIND_ROUNDS:
                again = []
            for entry in to_bind:
                if entry not in again:  # settled now: cancelled later, a bound member keeps its hold
                    self._settle_member(entry, bound[entry.member.uid])
            to_bind = again
            if not to_bind:
                break
            log.warning(
                "binder.gang_member_retry",
                extra={
                    "fields": {
                        "pods": [f"{e.member.namespace}/{e.member.name}" for e in to_bind],
                        "round": round_ + 1,
                        "reasons": [bound[e.member.uid].reason for e in to_bind],
                    }
                },
            )
        return [(e.member, e.already_bound or bound[e.member.uid]) for e in checked]

    def _settle_member(self, entry: _Checked, result: BindResult) -> None:
        if entry.ticket is not None:
            self._steps.settle_hold(entry.member, entry.ticket, result)
            entry.ticket = None

    def _put_back(self, checked: list[_Checked]) -> None:
        for entry in reversed(checked):
            if entry.ticket is not None:
                self._steps.put_back(entry.member, entry.ticket)
                entry.ticket = None
