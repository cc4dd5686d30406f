"""The producing edge of every service: events as JSON with trace context, acknowledged, retried when transient."""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Self

import msgspec
from aiokafka import AIOKafkaProducer
from aiokafka.errors import IllegalStateError, KafkaError
from opentelemetry import trace
from prometheus_client import Counter

from schemas.topics import Topic
from topoplace import telemetry
from topoplace.kafka import broker_kind
from topoplace.kafka.security import KafkaSecurity, client_options
from topoplace.kafka.wire import encode_event, trace_headers
from topoplace.supervise import Backoff, is_transient_kafka_error

log = logging.getLogger(__name__)

# A send is tried this often in all before its transient error is raised: about 10 s of backoff
# in the worst case, enough for a broker restart, short enough that a caller learns of an outage.
SEND_ATTEMPTS = 6
SEND_BACKOFF = Backoff(base=0.1, cap=4.0)

MESSAGES_PRODUCED = Counter("topoplace_messages_produced", "Messages acknowledged by the broker", ["topic", "service"])
SEND_RETRIES = Counter(
    "topoplace_send_retries", "Sends tried again after a transient Kafka error", ["topic", "service"]
)


class EventProducer:
    """Sends events as JSON with the current trace context; returns once the broker has them."""

    def __init__(
        self,
        bootstrap: str,
        *,
        service: str,
        idempotence: bool = False,
        send_attempts: int = SEND_ATTEMPTS,
        backoff: Backoff = SEND_BACKOFF,
        security: KafkaSecurity | None = None,
    ) -> None:
        if send_attempts < 1:
            raise ValueError(f"send_attempts: must be at least 1, got {send_attempts}")
        self.bootstrap = bootstrap
        self.service = service
        self.idempotence = idempotence
        self.send_attempts = send_attempts
        self.backoff = backoff
        self.security = security
        self._producer: AIOKafkaProducer | None = None
        # Set when the broker may have lost its data: a send went through after transient
        # failures, or a partition acknowledged an offset below one it acknowledged before (a
        # broker restarted empty; aiokafka reconnects by itself, so that is often the only sign).
        # Publishers of state (the collectors) republish everything then.
        self.recovered = asyncio.Event()
        self._last_offsets: dict[tuple[str, int], int] = {}  # bounded by the partitions written to

    async def start(self) -> None:
        if self._producer is not None:
            return
        if self.idempotence and await broker_kind.is_embedded(self.bootstrap, self.security):
            # The embedded broker cannot serve InitProducerId: every send would fail.
            log.warning(
                "kafka.idempotence_off", extra={"fields": {"reason": "embedded broker", "service": self.service}}
            )
            self.idempotence = False
        producer = self.client()
        try:
            await producer.start()
        except BaseException:
            await producer.stop()  # no half-open client left behind
            raise
        self._producer = producer

    def acknowledged_ends(self) -> dict[tuple[str, int], int]:
        """Per (topic, partition) written to: one past the last offset the broker acknowledged."""
        return {where: offset + 1 for where, offset in self._last_offsets.items()}

    def client(self) -> AIOKafkaProducer:
        """The aiokafka producer this sends with (not started)."""
        return AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            client_id=self.service,
            acks="all",  # durable before send() returns: offsets are committed after it
            enable_idempotence=self.idempotence,
            **client_options(self.security),
        )

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None:
        """Send one event (None = tombstone) and wait for the broker's acknowledgement.

        A transient Kafka error (the broker restarting, a leader moving) is retried with
        backoff and jitter, up to `send_attempts` tries in all; then it is raised. An event
        over its bound raises EventTooLarge before anything is sent; any other Kafka error
        is raised at once (it is the event's, not the broker's: sending again cannot help).
        """
        if self._producer is None:
            raise IllegalStateError(f"EventProducer of {self.service} is not started")
        name = topic if isinstance(topic, str) else topic.name
        value = encode_event(event) if event is not None else None
        for attempt in range(self.send_attempts):
            try:
                await self._send_once(name, key, value)
                if attempt > 0:
                    self.recovered.set()
                return
            except KafkaError as exc:
                if attempt + 1 == self.send_attempts or not is_transient_kafka_error(exc):
                    raise
                delay = self.backoff.delay(attempt)
                SEND_RETRIES.labels(topic=name, service=self.service).inc()
                log.warning(
                    "kafka.send_retry",
                    extra={
                        "fields": {
                            "topic": name,
                            "attempt": attempt + 1,
                            "error": f"{type(exc).__name__}: {exc}",
                            "retry_in_s": round(delay, 3),
                        }
                    },
                )
                await asyncio.sleep(delay)  # backoff before the next try

    async def _send_once(self, name: str, key: str | None, value: bytes | None) -> None:
        assert self._producer is not None
        tracer = telemetry.get_tracer(__name__, self.service)
        with tracer.start_as_current_span(
            f"send {name}",
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "send",
                "messaging.destination.name": name,
                "messaging.kafka.message.key": key or "",
            },
        ) as span:
            metadata = await self._producer.send_and_wait(
                name,
                value=value,
                key=key.encode("utf-8") if key is not None else None,
                headers=trace_headers(),
            )
            span.set_attribute("messaging.destination.partition.id", str(metadata.partition))
            span.set_attribute("messaging.kafka.offset", metadata.offset)
        where = (name, metadata.partition)
        if metadata.offset <= self._last_offsets.get(where, -1):
            log.warning(
                "kafka.offset_went_back",
                extra={
                    "fields": {
                        "topic": name,
                        "partition": metadata.partition,
                        "offset": metadata.offset,
                        "before": self._last_offsets[where],
                    }
                },  # fmt: skip
            )
            self.recovered.set()
        self._last_offsets[where] = metadata.offset
        MESSAGES_PRODUCED.labels(topic=name, service=self.service).inc()
