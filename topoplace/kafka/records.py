"""One consumed record, start to end: decode it, check it, hand it to the service or dead-letter it.

Shared by the group consumer (topoplace.kafka.consumer) and the topic follower
(topoplace.kafka.follower). A record is rejected into `<topic>.dlq`
(topoplace.kafka.dead_letters) with the field and the reason when it does not decode
as its topic's event (topoplace.kafka.wire), when it breaks its topic's rules
(topoplace.event_checks: the key names the object, a node's topology is consistent),
or when the handler raised.

A rejected record of a compacted topic is also, for the handler, a tombstone of its
key: the last record per key is the state, so a key whose last record is invalid has
no state. Otherwise the state would depend on whether the broker had compacted yet: a
live reader would keep the older valid record, a reader replaying after compaction
would find only the invalid one. With the tombstone every reader, live or replaying,
compacted or not, sees the key gone until a valid record comes (the collectors
republish their state periodically). A record keyed `gpu-9` that names `gpu-1` only
ever removes `gpu-9`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

import msgspec
from aiokafka import ConsumerRecord
from opentelemetry import context as otel_context
from opentelemetry.context import Context
from prometheus_client import Counter, Histogram

from schemas.events import Event
from schemas.topics import Topic
from topoplace.event_checks import InvalidEvent, check_event
from topoplace.kafka.dead_letters import send_dead_letter
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.wire import (
    DecodeError,
    Headers,
    RejectReason,
    decode_event,
    decode_key,
    extract_trace_context,
)

log = logging.getLogger(__name__)

# --- metrics (default registry; served by topoplace.health) ----------------------------------

MESSAGES_CONSUMED = Counter("topoplace_messages_consumed", "Messages read from a topic", ["topic", "service"])
HANDLER_SECONDS = Histogram(
    "topoplace_handler_seconds",
    "Time a service's handler took for one message",
    ["topic", "service"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)


class Received(msgspec.Struct, frozen=True, kw_only=True):
    """One decoded message, as handed to a service's handler."""

    topic: str
    partition: int
    offset: int
    key: str | None
    event: Event | None  # None: a tombstone (compacted topics only)
    trace_context: Context  # where the producer's span left off; start the handler's span here
    timestamp_ms: int
    headers: Headers = ()


Handler = Callable[[Received], Awaitable[None]]


class RecordProcessor:
    """Decode one record, reject it or hand it over, and count it: shared by consumer and follower."""

    def __init__(self, topics: Sequence[Topic], service: str, producer: EventProducer | None) -> None:
        self.topics = {t.name: t for t in topics}
        self.service = service
        self.producer = producer

    def receive(self, record: ConsumerRecord[bytes, bytes]) -> Received:
        """Raises DecodeError for a message that is no valid event of its topic, InvalidEvent for one
        that breaks its topic's rules (topoplace.event_checks)."""
        topic = self.topics[record.topic]
        headers: Headers = tuple(record.headers or ())
        received = Received(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=decode_key(record.key),
            event=decode_event(topic, record.value),
            trace_context=extract_trace_context(headers),
            timestamp_ms=record.timestamp,
            headers=headers,
        )
        check_event(record.topic, received.key, received.event)
        return received

    async def process(self, record: ConsumerRecord[bytes, bytes], handler: Handler) -> None:
        """Hand one record to `handler`; a bad record or a failed handler is dead-lettered.

        Returns once the record is done with: handled, dead-lettered, or (when the
        dead letter itself cannot be sent) logged and counted, so that one message
        never stops its partition. A rejected record of a compacted topic reaches the
        handler as a tombstone of its key (see the module's docstring).
        """
        MESSAGES_CONSUMED.labels(topic=record.topic, service=self.service).inc()
        try:
            received = self.receive(record)
        except DecodeError as exc:
            await self.reject(record, exc.kind, exc.error)
            await self._forget_key(record, handler)
            return
        except InvalidEvent as exc:
            await self.reject(record, RejectReason.INVALID_EVENT, str(exc))
            await self._forget_key(record, handler)
            return
        failure = await self._handle(received, handler)
        if failure is not None:
            await self.reject(record, RejectReason.HANDLER_ERROR, f"handler: {type(failure).__name__}: {failure}")

    async def _forget_key(self, record: ConsumerRecord[bytes, bytes], handler: Handler) -> None:
        """A rejected record's key has no valid state: a compacted topic's handler gets its tombstone."""
        key = decode_key(record.key)
        if key is None or not self.topics[record.topic].compacted:
            return
        headers: Headers = tuple(record.headers or ())
        tombstone = Received(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=key,
            event=None,
            trace_context=extract_trace_context(headers),
            timestamp_ms=record.timestamp,
            headers=headers,
        )
        await self._handle(tombstone, handler)  # a failure is logged; the record is dead-lettered already

    async def _handle(self, received: Received, handler: Handler) -> Exception | None:
        """Run the handler in the producer's trace context; its failure (logged) is returned, not raised."""
        # The producer's context is also the current one while the handler runs,
        # so its log lines carry the trace id and an unparented span still joins
        # the trace; handlers pass received.trace_context to their span anyway.
        token = otel_context.attach(received.trace_context)
        failure: Exception | None = None
        started = time.perf_counter()
        try:
            await handler(received)
        except Exception as exc:  # any handler failure is this message's, not the stream's
            failure = exc
        finally:
            HANDLER_SECONDS.labels(topic=received.topic, service=self.service).observe(time.perf_counter() - started)
            otel_context.detach(token)
        if failure is not None:
            where = {"topic": received.topic, "partition": received.partition, "offset": received.offset}
            log.error("handler.failed", exc_info=failure, extra={"fields": where})
        return failure

    async def reject(self, record: ConsumerRecord[bytes, bytes], kind: str, error: str) -> None:
        await send_dead_letter(self.producer, self.topics[record.topic], record, kind, error, service=self.service)
