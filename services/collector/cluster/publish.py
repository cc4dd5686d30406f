"""How the cluster watcher puts events on Kafka: in order per key, together across keys, one object's failure its own.

A pending pod's event goes out inside its own "pod.pending" span (a gang's in "gang.pending"),
so the placer continues that trace; a pod's ResourceClaims (each gang member's) are read just before.

An event that cannot be published (over its bound, or refused by the broker with a
non-retriable error: RecordTooLargeError, MessageSizeTooLargeError, ...) is that object's
problem, never the watcher's: it is logged (`collector.unpublishable`), counted in
`topoplace_cluster_watcher_unpublishable_total{topic, error}`, and a pending pod (or each
member of a pending gang) goes out reduced to who it is, with the reason, so that the placer
reports it unschedulable and the pod gets a FailedScheduling Event. Restarting the watcher
could not help: the same object would fail again, and every other object with it. A
transient error (the broker away) still ends the run, so that the supervisor reconnects.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import aiohttp
import msgspec
from aiokafka.errors import IllegalStateError, KafkaError
from kubernetes_asyncio import client
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue
from prometheus_client import Counter

from schemas import topics
from schemas.events import PendingGangEvent, PendingPodEvent
from schemas.topics import Topic
from services.collector.cluster import dra
from services.collector.cluster.pending_fields import unpublishable
from services.collector.cluster.trackers import Outcome, Publication
from topoplace.kafka.wire import EventTooLarge
from topoplace.supervise import is_transient_kafka_error

CLAIM_READ_TIMEOUT_S = 30.0
MAX_IN_FLIGHT = 1024  # sends awaiting the broker at once during a list

log = logging.getLogger(__name__)
_claim_decoder = msgspec.json.Decoder(dra.ResourceClaim)

PUBLISHED = Counter("topoplace_cluster_watcher_published_total", "Events the cluster watcher published", ["topic"])
BAD_FIELDS = Counter(
    "topoplace_cluster_watcher_bad_fields_total",
    "Object fields that could not be read (the event went out without them)",
    ["field"],
)
UNPUBLISHABLE = Counter(
    "topoplace_cluster_watcher_unpublishable_total",
    "Events the cluster watcher could not publish (over their bound, or refused by the broker)",
    ["topic", "error"],
)


class Publisher(Protocol):
    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None: ...


def is_objects_problem(exc: BaseException) -> bool:
    """Whether a failed send is the event's fault (sending it again cannot help), not the broker's."""
    if isinstance(exc, EventTooLarge):
        return True
    return isinstance(exc, KafkaError) and not isinstance(exc, IllegalStateError) and not is_transient_kafka_error(exc)


class EventPublishing:
    """Publishes a tracker's Outcome through `publisher`; reads pending pods' claims with `dra`."""

    def __init__(self, publisher: Publisher, dra: client.ResourceV1Api, tracer: Tracer) -> None:
        self.publisher = publisher
        self.dra = dra
        self._tracer = tracer
        self._in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)

    async def publish(self, outcome: Outcome) -> None:
        for problem in outcome.problems:
            BAD_FIELDS.labels(field=problem.field.split("[")[0]).inc()
            log.warning(
                "collector.bad_field",
                extra={"fields": {"object": problem.object, "field": problem.field, "reason": problem.reason}},
            )
        # Each resource's handler runs to completion before its next change is read, and
        # one key's events go out one after the other, so each key's events keep their
        # order; different keys go out together (a relist of many pods is not a round
        # trip per pod).
        chains: dict[tuple[str, str], list[Publication]] = {}
        for publication in outcome.publications:
            chains.setdefault((publication.topic, publication.key), []).append(publication)
        if len(chains) <= 1:
            for chain in chains.values():
                await self._send_in_order(chain)
            return
        async with asyncio.TaskGroup() as group:
            for chain in chains.values():
                group.create_task(self._send_in_order(chain))

    async def _send_in_order(self, chain: list[Publication]) -> None:
        async with self._in_flight:
            for publication in chain:
                try:
                    await self._send(publication)
                except (EventTooLarge, KafkaError) as exc:
                    if not is_objects_problem(exc):
                        raise  # the broker's: the supervisor reconnects and everything is listed again
                    await self._unpublishable(publication, exc)
                    continue
                PUBLISHED.labels(topic=publication.topic).inc()

    async def _send(self, publication: Publication) -> None:
        if isinstance(publication.event, PendingPodEvent):
            await self._publish_pending(publication.event)
        elif isinstance(publication.event, PendingGangEvent):
            await self._publish_gang(publication.event)
        else:
            await self.publisher.send(publication.topic, publication.key, publication.event)

    async def _unpublishable(self, publication: Publication, exc: EventTooLarge | KafkaError) -> None:
        """Log and count the failure; a pending pod or gang goes out reduced, with the reason, to be reported."""
        error = f"{type(exc).__name__}: {exc}"
        UNPUBLISHABLE.labels(topic=publication.topic, error=type(exc).__name__).inc()
        log.error(
            "collector.unpublishable",
            extra={"fields": {"topic": publication.topic, "key": publication.key[:300], "error": error[:1000]}},
        )
        event = publication.event
        if isinstance(event, PendingPodEvent):
            reason = f"the pod's scheduling event could not be published: {error}"[:1000]
            reduced: PendingPodEvent | PendingGangEvent = unpublishable(event, reason)
        elif isinstance(event, PendingGangEvent):
            reason = f"the gang's scheduling event could not be published: {error}"[:1000]
            reduced = msgspec.structs.replace(event, members=tuple(unpublishable(m, reason) for m in event.members))
        else:
            return  # state: the next change or resync of the object tries again
        try:
            await self.publisher.send(publication.topic, publication.key, reduced)
        except (EventTooLarge, KafkaError) as again:
            if not is_objects_problem(again):
                raise
            UNPUBLISHABLE.labels(topic=publication.topic, error=type(again).__name__).inc()
            log.error(
                "collector.unpublishable_reduced",
                extra={
                    "fields": {"topic": publication.topic, "key": publication.key[:300], "error": str(again)[:1000]}
                },
            )
            return
        PUBLISHED.labels(topic=publication.topic).inc()

    async def _publish_pending(self, event: PendingPodEvent) -> None:
        if event.claims:
            with_claims = await self._with_claims(event)
            if with_claims is None:
                return
            event = with_claims
        # A span of its own per publication: the producer injects it as traceparent, and the
        # placer continues whichever trace it receives, so a resync's re-publication is harmless.
        attributes = {
            "k8s.pod.uid": event.uid,
            "k8s.pod.name": event.name,
            "k8s.pod.namespace": event.namespace,
            "k8s.namespace.name": event.namespace,  # the OpenTelemetry semantic-convention name
        }
        with self._tracer.start_as_current_span("pod.pending", attributes=attributes):
            await self.publisher.send(topics.PODS_PENDING, event.uid, event)
        pod = f"{event.namespace}/{event.name}"
        if event.unpublishable:
            log.warning("collector.pod_unpublishable", extra={"fields": {"uid": event.uid, "pod": pod}})
        log.info("collector.pod_pending", extra={"fields": {"uid": event.uid, "pod": pod}})

    async def _publish_gang(self, event: PendingGangEvent) -> None:
        if any(m.claims for m in event.members):
            # the members' claims read whole, as a single pod's are: the placer allocates them with the gang
            members = []
            for member in event.members:
                with_claims = await self._with_claims(member) if member.claims else member
                if with_claims is None:
                    return  # a claim unreadable: the gang goes out at the next resync
                members.append(with_claims)
            event = msgspec.structs.replace(event, members=tuple(members))
        uids = [m.uid for m in event.members]
        attributes: dict[str, AttributeValue] = {
            "topoplace.gang.name": event.name,
            "topoplace.gang.source": event.source,
            "topoplace.gang.min_member": event.min_member,
            "topoplace.gang.member_uids": uids,
            "topoplace.gang.running": len(event.running),
            "k8s.namespace.name": event.namespace,
        }
        with self._tracer.start_as_current_span("gang.pending", attributes=attributes):
            await self.publisher.send(topics.GANGS_PENDING, event.name, event)
        log.info(
            "collector.gang_pending",
            extra={"fields": {"gang": event.name, "pending": len(uids), "running": len(event.running)}},
        )

    async def _with_claims(self, event: PendingPodEvent) -> PendingPodEvent | None:
        """The event with its ResourceClaims read; None while one does not exist yet (or cannot be read).

        A template's claim appears in the pod's status once the controller made it: that pod
        update brings the pod here again.
        """
        claims = []
        for ref in event.claims:
            try:
                claim = await self._read_claim(event.namespace, ref.claim_name) if ref.claim_name else None
            except (client.ApiException, aiohttp.ClientError, TimeoutError) as exc:
                # the pod goes out at the next resync: one claim must not stop the watch
                log.warning("collector.claim_unreadable", extra={"fields": {"uid": event.uid, "error": str(exc)}})
                return None
            if claim is None:
                # decided all the same: the placer answers with kube-scheduler's reason, and the
                # pod comes here again when its status names the claim, or at the next resync
                log.info(
                    "collector.claim_waiting",
                    extra={"fields": {"pod": f"{event.namespace}/{event.name}", "claim": ref.pod_claim_name}},
                )
                claims.append(dra.waiting(event.namespace, event.name, ref))
                continue
            claims.append(dra.resolved(ref, claim))
        return msgspec.structs.replace(event, claims=tuple(claims))

    async def _read_claim(self, namespace: str, name: str) -> dra.ResourceClaim | None:
        # read raw: the claim is decoded into our own Struct, not the client's model
        reply: Any = await self.dra.read_namespaced_resource_claim(
            name, namespace, _preload_content=False, _request_timeout=CLAIM_READ_TIMEOUT_S
        )
        try:
            body = await reply.read()
        finally:
            reply.release()
        if reply.status == 404:
            return None
        if not 200 <= reply.status <= 299:
            raise client.ApiException(status=reply.status, reason=reply.reason)
        return _claim_decoder.decode(body)
