"""The placer service: rebuild the view from the topics, then decide pending pods.

Wiring only; the decisions are made by `services.placer.decide` (pure).

- A TopicFollower reads every partition of the state topics, and of
  placements and bindings, from offset 0: every replica rebuilds the whole
  view (including the assumptions of decisions not yet bound) and applies
  every binding outcome, whichever replica made the decision.
- Once the follower has caught up, an EventConsumer in the group
  "<prefix>-placer" reads pods.pending; a pending pod's offset is committed
  only after its decision was acknowledged by the broker.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.context import Context

from engine import Engine, Mode
from schemas import topics
from schemas.enforcement import Enforcement
from schemas.events import GangPlacementEvent, PendingGangEvent, PendingPodEvent, PlacementEvent, PlacementOutcome
from services.placer import metrics
from services.placer.decide import Cause, Decider, FollowUp
from services.placer.parking import TicketState
from services.placer.view import VIEW_TOPICS
from topoplace import telemetry
from topoplace.config import NODE_POLICY, ConfigError, Settings
from topoplace.feature_gates import FeatureGates
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received
from topoplace.kafka.wire import extract_trace_context
from topoplace.service_runtime import Follow, Loop, RunContext, ServiceRun, ServiceSpec, Stage, Work, run_service

SERVICE = "topoplace-placer"

# Everything the view is rebuilt from. placements and bindings are here, not in
# the group consumer: every replica must know every outstanding decision and
# every binder answer, not only those of its own partitions.
# The view's topics (VIEW_TOPICS), and gangs.placements: the Decider applies a gang's members.
FOLLOWED_TOPICS: tuple[topics.Topic, ...] = (*(row.topic for row in VIEW_TOPICS), topics.GANG_PLACEMENTS)
DECIDED_TOPICS: tuple[topics.Topic, ...] = (topics.PODS_PENDING, topics.GANGS_PENDING)

# A decision this run sent this recently is still on its way through the binder: a repeat of
# its pod's pending event (a relist, a redelivery) does not send it again. Sending every pending
# pod's decision again at every relist left a binder that was behind on a busy node further
# behind on copies. A decision lost with the broker is sent again at the first repeat after this.
RESEND_AFTER_S = 30.0
PUBLISH_ATTEMPTS = 8
PUBLISH_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 4.0)

log = logging.getLogger(__name__)

# How often parked pods whose backoff has passed are decided again (kube-scheduler flushes its
# backoff queue every second), and those parked too long are queued.
RETRY_TICK_S = 1.0

# Messages of one partition handled at once: the handler's synchronous part runs in order,
# its API calls and produces overlap.
CONCURRENCY = 16


class RecentlySent:
    """When this run last published each decision, forgotten once older than `resend_after` seconds."""

    def __init__(self, resend_after: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._resend_after = resend_after
        self._clock = clock
        self._at: collections.OrderedDict[str, float] = collections.OrderedDict()  # oldest first

    def recent(self, decision_id: str) -> bool:
        self._forget_old()
        return decision_id in self._at

    def sent(self, decision_id: str) -> None:
        self._at[decision_id] = self._clock()
        self._at.move_to_end(decision_id)
        self._forget_old()

    def __len__(self) -> int:
        return len(self._at)

    def _forget_old(self) -> None:
        horizon = self._clock() - self._resend_after
        while self._at and next(iter(self._at.values())) < horizon:
            self._at.popitem(last=False)


class PlacerService:
    """The handlers of both streams around one Decider, and the publishing of decisions."""

    def __init__(
        self,
        producer: EventProducer,
        *,
        mode: Mode = Mode.DEFAULT,
        engine: Engine | None = None,
        node_policy: str | None = None,
        default_enforcement: Enforcement | None = None,
        feature_gates: FeatureGates | None = None,
    ) -> None:
        """`engine`: the engine deciding (one of its own when None); `feature_gates`: TOPOPLACE_FEATURE_GATES."""
        self.producer = producer
        self.decider = Decider(
            mode=mode,
            engine=engine,
            node_policy=node_policy,
            default_enforcement=default_enforcement,
            feature_gates=feature_gates,
        )
        self._tracer = telemetry.get_tracer(__name__, SERVICE)
        self._stopping = asyncio.Event()
        self.sent = RecentlySent(RESEND_AFTER_S)
        # Read at scrape time: counting on every message would cost a walk of the view each.
        for what in self.decider.view.sizes():
            metrics.VIEW_SIZE.labels(what=what).set_function(self._view_size(what))
        for state in TicketState:
            metrics.WAITING_PODS.labels(state=state.value).set_function(self._waiting(state))

    def _view_size(self, what: str) -> Callable[[], float]:
        return lambda: float(self.decider.view.sizes()[what])

    def _waiting(self, state: TicketState) -> Callable[[], float]:
        return lambda: float(self.decider.parking.counts()[state])

    def stop(self) -> None:
        """Give up publish retries: the message in hand stays uncommitted."""
        self._stopping.set()

    async def on_pending(self, received: Received) -> None:
        pending = received.event
        if isinstance(pending, PendingGangEvent):
            await self._on_gang(pending, received)
            return
        if not isinstance(pending, PendingPodEvent):
            return  # no tombstones on pods.pending; nothing to decide
        with self._tracer.start_as_current_span("placer.decide", context=received.trace_context) as span:
            span.set_attributes(_pod_attributes(pending))
            started = time.perf_counter()
            result = self.decider.on_pending(pending, now=time.time(), origin=received.headers)
            metrics.DECISION_SECONDS.observe(time.perf_counter() - started)
            placement = result.placement
            if placement is None:
                span.set_attribute("topoplace.outcome", "skipped")
                log.info(
                    "pod.skipped",
                    extra={"fields": {"uid": pending.uid, "why": result.note}},
                )
                return
            await self._publish(
                placement,
                span,
                cause=Cause.REPEATED if result.repeated else Cause.PENDING,
            )

    async def _on_gang(self, gang: PendingGangEvent, received: Received) -> None:
        with self._tracer.start_as_current_span("placer.decide_gang", context=received.trace_context) as span:
            span.set_attribute("topoplace.gang", gang.name)
            span.set_attribute("k8s.pod.uids", [m.uid for m in gang.members])
            started = time.perf_counter()
            result = self.decider.on_gang(gang, now=time.time(), origin=received.headers)
            metrics.DECISION_SECONDS.observe(time.perf_counter() - started)
            if result.placement is None:
                span.set_attribute("topoplace.outcome", "skipped")
                return
            await self._publish(result.placement, span, cause=Cause.REPEATED if result.repeated else Cause.PENDING)

    async def on_state(self, received: Received) -> None:
        now = time.time()
        if received.event is None:
            if received.key is None:
                return
            follow_ups = self.decider.on_tombstone(received.topic, received.key, now=now)
        else:
            follow_ups = self.decider.on_event(received.event, now=now)
        await self._publish_follow_ups(follow_ups, received.trace_context)

    async def retry_parked(self) -> None:
        """One tick of the parked pods' retries: a bounded number decided, each after its backoff."""
        await self._publish_follow_ups(self.decider.tick(now=time.time()), Context())

    async def _publish_follow_ups(self, follow_ups: list[FollowUp], trace_context: Context) -> None:
        for follow_up in follow_ups:
            placement = follow_up.placement
            # A follow-up belongs to the pod's trace: the one its pending event
            # brought here, else (a re-plan) the binder's answer, which is in it too.
            if follow_up.origin:
                parent = extract_trace_context(follow_up.origin)
            else:
                parent = trace_context if follow_up.cause is Cause.REPLAN else Context()
            with self._tracer.start_as_current_span("placer.decide", context=parent) as span:
                if isinstance(placement, PlacementEvent):
                    span.set_attributes(_pod_attributes(placement))
                else:
                    span.set_attribute("topoplace.gang", placement.name)
                await self._publish(placement, span, cause=follow_up.cause)

    async def _publish(self, placement: PlacementEvent | GangPlacementEvent, span: trace.Span, *, cause: Cause) -> None:
        span.set_attributes(_decision_attributes(placement))
        span.set_attribute("topoplace.cause", cause.value)
        sent_as = _sent_as(placement)
        if (cause is Cause.REPEATED or placement.outcome is PlacementOutcome.UNSCHEDULABLE) and self.sent.recent(
            sent_as
        ):
            span.set_attribute("topoplace.resent", False)
            metrics.DECISIONS.labels(outcome=placement.outcome.value, cause=cause.value).inc()
            return  # still on its way through the binder, or the pod already told the same
        if isinstance(placement, GangPlacementEvent):
            topic, key = topics.GANG_PLACEMENTS, placement.name
        else:
            topic = topics.PLACEMENTS
            key = placement.node if placement.outcome is PlacementOutcome.PLACED else placement.uid
        started = time.perf_counter()
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                await self.producer.send(topic, key, placement)
                break
            except Exception as exc:
                if attempt == PUBLISH_ATTEMPTS or self._stopping.is_set():
                    if cause is not Cause.REPEATED:
                        self.decider.retract(placement)
                    if self._stopping.is_set():
                        # Leave the message uncommitted: it is read again after the restart.
                        raise asyncio.CancelledError from exc
                    raise
                log.warning(
                    "placement.publish_retry",
                    extra={
                        "fields": {
                            "key": key,
                            "attempt": attempt,
                            "error": repr(exc),
                        }
                    },
                )
                await asyncio.sleep(PUBLISH_BACKOFF_S[min(attempt - 1, len(PUBLISH_BACKOFF_S) - 1)])
        metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)
        self.sent.sent(sent_as)
        metrics.DECISIONS.labels(outcome=placement.outcome.value, cause=cause.value).inc()
        if isinstance(placement, GangPlacementEvent):
            log.info(
                "gang.placed" if placement.outcome is PlacementOutcome.PLACED else "gang.unschedulable",
                extra={
                    "fields": {
                        "gang": placement.name,
                        "decision_id": placement.decision_id,
                        "members": {m.name: m.node for m in placement.members},
                        "hypernode": placement.hypernode,
                        "tier": placement.tier,
                        "reason": placement.reason,
                        "cause": cause.value,
                    }
                },
            )
            return
        log.info(
            "pod.placed" if placement.outcome is PlacementOutcome.PLACED else "pod.unschedulable",
            extra={
                "fields": {
                    "uid": placement.uid,
                    "pod": f"{placement.namespace}/{placement.name}",
                    "decision_id": placement.decision_id,
                    "node": placement.node,
                    "devices": [d.index for d in placement.devices],
                    "score": placement.score,
                    "reason": placement.reason,
                    "cause": cause.value,
                }
            },
        )


def _sent_as(placement: PlacementEvent | GangPlacementEvent) -> str:
    """What makes two sends the same: a placement's decision id; for an unschedulable pod or gang,
    its reason (each relist re-decides it under a new id, and the binder would write the same
    condition again: under a short relist period that flood held up the binder's bindings)."""
    if placement.outcome is not PlacementOutcome.UNSCHEDULABLE:
        return placement.decision_id
    who = placement.uid if isinstance(placement, PlacementEvent) else f"gang/{placement.namespace}/{placement.name}"
    return f"unschedulable|{who}|{placement.reason}"


def _pod_attributes(pod: PendingPodEvent | PlacementEvent) -> dict[str, str]:
    return {
        "k8s.pod.uid": pod.uid,
        "k8s.namespace.name": pod.namespace,
        "k8s.pod.name": pod.name,
    }


def _decision_attributes(
    placement: PlacementEvent | GangPlacementEvent,
) -> dict[str, str | int | float | Sequence[int] | Sequence[str]]:
    if isinstance(placement, GangPlacementEvent):
        return {
            "topoplace.decision_id": placement.decision_id,
            "topoplace.outcome": placement.outcome.value,
            "topoplace.gang": placement.name,
            "topoplace.hypernode": placement.hypernode,
            "topoplace.tier": placement.tier if placement.tier is not None else -1,
            "topoplace.nodes": [m.node for m in placement.members],
            "topoplace.reason": placement.reason,
        }
    return {
        "topoplace.decision_id": placement.decision_id,
        "topoplace.outcome": placement.outcome.value,
        "topoplace.candidates_considered": placement.candidates_considered,
        "topoplace.node": placement.node,
        "topoplace.devices": [d.index for d in placement.devices],
        "topoplace.score": placement.score,
        "topoplace.reason": placement.reason,
    }


async def run_placer(
    settings: Settings,
    *,
    mode: Mode = Mode.DEFAULT,
    stop: asyncio.Event | None = None,
    engine: Engine | None = None,
    on_caught_up: Callable[[], None] | None = None,
) -> None:
    """Run one placer replica until `stop` is set (or a stream fails for a reason other than Kafka).

    `engine`: the engine every decision of this replica uses, across stream restarts (its own when None).
    `on_caught_up`: called each time the view holds what the topics say, before the first decision (the
    command freezes the long-lived view out of the garbage collector's way there)."""
    if mode is Mode.HAMI and settings.node_policy not in (None, "binpack", "spread"):
        # HAMi knows binpack and spread only; refuse at start rather than fail every pod.
        raise ConfigError(NODE_POLICY, f"{settings.node_policy!r} is not a node policy of hami mode (binpack, spread)")
    replica_engine = engine if engine is not None else Engine()

    async def build(run: RunContext) -> ServiceRun:
        """One run: an empty view fed from offset 0; no decision before it holds what the topics say."""
        metrics.CAUGHT_UP.set(0)
        service = PlacerService(
            run.producer,
            mode=mode,
            engine=replica_engine,
            node_policy=settings.node_policy,
            default_enforcement=Enforcement(settings.enforcement) if settings.enforcement else None,
            feature_gates=FeatureGates(gates=settings.feature_gates),
        )
        service.decider.view.nominations.ttl = settings.nomination_seconds

        def working() -> None:
            if on_caught_up is not None:
                on_caught_up()
            metrics.CAUGHT_UP.set(1)
            log.info("placer.caught_up", extra={"fields": {"view": service.decider.view.sizes()}})

        async def closing() -> None:
            service.stop()
            metrics.CAUGHT_UP.set(0)

        return ServiceRun(
            stages=(Stage(follow=Follow(topics=FOLLOWED_TOPICS, handler=service.on_state)),),
            work=Work(
                topics=DECIDED_TOPICS,
                handler=service.on_pending,
                concurrency=CONCURRENCY,
                loops=(Loop("retries", lambda: _retry_ticks(service, run.stop)),),
            ),
            working=working,
            closing=closing,
        )

    spec = ServiceSpec(
        name=SERVICE, log_name="placer", settings=settings, build=build, stop=stop, started_fields={"mode": mode.value}
    )
    await run_service(spec)


async def _retry_ticks(service: PlacerService, stop: asyncio.Event) -> None:
    """Every RETRY_TICK_S until `stop`: the parked pods' retries that no event brought."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RETRY_TICK_S)
            return
        await service.retry_parked()
