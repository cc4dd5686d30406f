"""Carrying out a preemption the placer decided (an UNSCHEDULABLE placement with victims).

Nothing forged decides: the preemptor must be a pending pod of ours in the binder's own watch,
and every victim a pod of that watch on the nominated node, of strictly lower priority than
the preemptor's (as the API server's admission wrote both), else nothing is written. A victim
already gone, or already being deleted, is skipped (its room comes anyway).

Order, as kube-scheduler's preemption does it: the preemptor's room there (the device shares
the placer chose for it, reservations.py) is reserved before any write; the preemptor gets
status.nominatedNodeName, and pods of lower priority nominated to the same node lose theirs;
each victim gets the condition DisruptionTarget (True, reason PreemptionByScheduler), is
deleted with its uid as precondition
(a pod re-created under the name is never touched) and its own grace period, and gets a
`Preempted` Event (retried: the one record of why the pod went), also when a lost reply made the
retried deletion answer 404 or 409 and a read confirms the pod of its uid is gone (the lost try
was the deletion). Every step is idempotent: a crash anywhere re-delivers the placement, which
does the rest.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas.events import BindingOutcome, PlacementEvent, PlacementOutcome, PreemptionVictim
from services.binder import metrics
from services.binder.cluster_view import ClusterView
from services.binder.kube_events import pod_event, truncate_message
from services.binder.outcome import BindResult, PodView
from services.binder.raw_api import api_error_text, raw_call
from services.binder.reservations import Reservations
from services.binder.retry import BackoffPolicy, RetriesExhausted, RetryBudget, call_with_retry

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
PREEMPTED = "Preempted"


class PodMetadata(msgspec.Struct, frozen=True):
    uid: str = ""


class PodIdentity(msgspec.Struct, frozen=True):
    """What `_gone` reads of a pod: its uid."""

    metadata: PodMetadata = PodMetadata()


class PreemptionRefused(Exception):
    """The placement's preemption does not hold against the binder's watch; nothing was written."""


def disruption_patch(uid: str, component: str, now: datetime.datetime) -> dict[str, Any]:
    condition = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{component}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}


def nomination_patch(uid: str, node: str | None) -> dict[str, Any]:
    return {"metadata": {"uid": uid}, "status": {"nominatedNodeName": node}}


class PreemptionExecutor:
    def __init__(
        self,
        core: client.CoreV1Api,
        cluster: ClusterView,
        reservations: Reservations,
        *,
        component: str,
        policy: BackoffPolicy,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._core = core
        self._cluster = cluster
        self._reservations = reservations
        self._component = component
        self._policy = policy
        self._clock = clock

    def checked(self, placement: PlacementEvent) -> tuple[PodView, list[tuple[PreemptionVictim, PodView]]]:
        """The preemptor and the victims still to evict, as the watch has them. PreemptionRefused."""
        cluster = self._cluster
        who = f"{placement.namespace}/{placement.name}"
        preemptor = cluster.pod(placement.uid)
        if preemptor is None or cluster.pod_name(placement.uid) != (placement.namespace, placement.name):
            raise PreemptionRefused(f"pod {who} (uid {placement.uid}) is not seen by the binder's watch")
        if preemptor.scheduler_name != cluster.scheduler_name or preemptor.node_name or preemptor.terminating:
            raise PreemptionRefused(f"pod {who} is not a pending pod of {cluster.scheduler_name}")
        if cluster.node_rules(placement.nominated_node) is None:
            raise PreemptionRefused(f"node {placement.nominated_node} is not known to the binder's watch")
        evict: list[tuple[PreemptionVictim, PodView]] = []
        for victim in placement.victims:
            view = cluster.pod(victim.uid)
            if view is None or view.finished:
                continue  # gone already: its room is free
            name = f"{victim.namespace}/{victim.name}"
            if cluster.pod_name(victim.uid) != (victim.namespace, victim.name):
                raise PreemptionRefused(f"victim {name} is not the pod of uid {victim.uid}")
            if view.node_name != placement.nominated_node:
                raise PreemptionRefused(f"victim {name} does not run on node {placement.nominated_node}")
            if view.priority >= preemptor.priority:
                why = f"victim {name} has priority {view.priority}, not below the preemptor's {preemptor.priority}"
                raise PreemptionRefused(why)
            if not view.terminating:
                evict.append((victim, view))
        return preemptor, evict

    async def carry_out(self, placement: PlacementEvent) -> BindResult:
        """Nominate the preemptor and evict its victims; the outcome stays UNSCHEDULABLE (it waits)."""
        node = placement.nominated_node
        try:
            preemptor, evict = self.checked(placement)
        except PreemptionRefused as exc:
            return BindResult(outcome=BindingOutcome.CONFLICT, reason=f"preemption refused: {exc}", attempts=0)
        # The preemptor's own room there, the shares the placer chose for it (reservations.py), nothing more.
        who = f"{placement.namespace}/{placement.name}"
        devices = placement.nominated_devices
        self._reservations.reserve(placement.uid, who, node, preemptor.priority, devices, len(evict), self._clock())
        try:
            await self._patch_status(placement.namespace, placement.name, nomination_patch(placement.uid, node))
            for uid in self._cluster.nominated_below(node, preemptor.priority, placement.uid):
                namespace, name = self._cluster.pod_name(uid) or ("", "")
                await self._patch_status(namespace, name, nomination_patch(uid, None))
            for victim, view in evict:
                await self._evict(victim, view, placement)
        except (ApiException, RetriesExhausted) as exc:
            error = api_error_text(exc) if isinstance(exc, ApiException) else str(exc)
            return BindResult(outcome=BindingOutcome.FAILED, reason=f"preemption on node {node} failed: {error}")
        if evict:
            metrics.PREEMPTIONS.inc()
            metrics.PREEMPTION_VICTIMS.inc(len(evict))
        reason = f"{placement.reason}; nominated to node {node}" if placement.reason else f"nominated to node {node}"
        return BindResult(outcome=BindingOutcome.UNSCHEDULABLE, reason=reason, attempts=1)

    async def _evict(self, victim: PreemptionVictim, view: PodView, placement: PlacementEvent) -> None:
        now = datetime.datetime.now(datetime.UTC)
        budget = RetryBudget(self._policy)  # of the deletion: a retry means a try may have been applied
        try:
            await self._patch_status(victim.namespace, victim.name, disruption_patch(victim.uid, self._component, now))
            options = client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid=victim.uid), grace_period_seconds=view.grace_seconds
            )
            call = functools.partial(
                self._core.delete_namespaced_pod,
                victim.name,
                victim.namespace,
                body=options,
                _preload_content=False,
                _request_timeout=self._policy.request_timeout_seconds,
            )
            await call_with_retry("delete pod", functools.partial(raw_call, call), budget)
        except ApiException as exc:
            if exc.status not in (404, 409, 422):
                raise
            # Gone, or another pod has the name now: not ours to touch. But when an earlier try was sent and
            # its answer lost, that try may have been the deletion: the victim gone by its uid is ours.
            if budget.retries == 0 or not await self._gone(victim):
                return
        log.info(
            "binder.preempted",
            extra={
                "fields": {"victim": f"{victim.namespace}/{victim.name}", "for": placement.uid, "node": view.node_name}
            },
        )
        await self._preempted_event(victim, placement, now)

    async def _gone(self, victim: PreemptionVictim) -> bool:
        """Whether the API server no longer has the pod of the victim's uid (the name absent, or another's)."""
        call = functools.partial(
            self._core.read_namespaced_pod,
            victim.name,
            victim.namespace,
            _preload_content=False,
            _request_timeout=self._policy.request_timeout_seconds,
        )
        try:
            body = await call_with_retry("read pod", functools.partial(raw_call, call), RetryBudget(self._policy))
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return msgspec.json.decode(body, type=PodIdentity).metadata.uid != victim.uid

    async def _patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        call = functools.partial(
            self._core.patch_namespaced_pod_status,
            name,
            namespace,
            patch,
            _content_type=STRATEGIC_MERGE_PATCH,  # type: ignore[call-arg]  # the runtime takes it; the stub lacks it
            _preload_content=False,
            _request_timeout=self._policy.request_timeout_seconds,
        )
        await call_with_retry("patch pod status", functools.partial(raw_call, call), RetryBudget(self._policy))

    async def _preempted_event(
        self, victim: PreemptionVictim, placement: PlacementEvent, now: datetime.datetime
    ) -> None:
        """kube's `Preempted` Event on the victim, retried as the other writes are (the Event is the one
        record of why the pod went); past the retries, best effort: the eviction stands without it."""
        about = PlacementEvent(
            decision_id=placement.decision_id,
            uid=victim.uid,
            namespace=victim.namespace,
            name=victim.name,
            pod_resource_version="",
            outcome=PlacementOutcome.UNSCHEDULABLE,
        )
        message = truncate_message(f"Preempted by pod {placement.uid} on node {placement.nominated_node}")
        body = pod_event(
            about, reason=PREEMPTED, event_type="Normal", message=message, component=self._component, now=now
        )
        call = functools.partial(
            self._core.create_namespaced_event,
            victim.namespace,
            body,
            _preload_content=False,
            _request_timeout=self._policy.request_timeout_seconds,
        )
        try:
            await call_with_retry("create event", functools.partial(raw_call, call), RetryBudget(self._policy))
        except ApiException as exc:
            if exc.status == 409:
                return  # an earlier try was written and its reply lost: the Event is there
            metrics.EVENTS_FAILED.inc()
            log.warning("binder.event_failed", extra={"fields": {"reason": PREEMPTED, "error": api_error_text(exc)}})
        except Exception as exc:  # noqa: BLE001 — best effort, like every Event
            metrics.EVENTS_FAILED.inc()
            log.warning("binder.event_failed", extra={"fields": {"reason": PREEMPTED, "error": repr(exc)}})
