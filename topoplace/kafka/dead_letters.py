"""Dead letters: a rejected record's copy in `<topic>.dlq`, with the field and the reason.

The value is cut to DLQ_VALUE_MAX_BYTES (with the size and SHA-256 of the whole), the error
to DLQ_ERROR_MAX_CHARS; the dead letter stays in the trace of the record it rejects.
"""

from __future__ import annotations

import hashlib
import logging
import time

from aiokafka import ConsumerRecord
from opentelemetry import context as otel_context
from prometheus_client import Counter

from schemas.events import DeadLetterEvent
from schemas.topics import Topic
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.wire import decode_key, extract_trace_context

log = logging.getLogger(__name__)

# A dead letter carries at most this much of the rejected value (bytes of UTF-8), so that even
# escaped as JSON (a control character takes 6 bytes) it stays far below the producer's 1 MB limit.
DLQ_VALUE_MAX_BYTES = 16 * 1024
DLQ_ERROR_MAX_CHARS = 4096

MESSAGES_DEAD_LETTERED = Counter(
    "topoplace_messages_dead_lettered",
    "Messages rejected (sent to <topic>.dlq, or dropped when there is no producer)",
    ["topic", "reason", "service"],
)
DEAD_LETTERS_FAILED = Counter(
    "topoplace_dead_letters_failed",
    "Rejected messages whose dead letter could not be sent (logged, committed, skipped)",
    ["topic", "service"],
)


async def send_dead_letter(
    producer: EventProducer | None,
    topic: Topic,
    record: ConsumerRecord[bytes, bytes],
    kind: str,
    error: str,
    *,
    service: str,
) -> None:
    """Send a rejected record to its topic's DLQ (logged and counted; without a producer, only that).

    Never raises: a dead letter that cannot be sent is logged and counted, so that one message
    never stops its partition.
    """

    MESSAGES_DEAD_LETTERED.labels(topic=record.topic, reason=kind, service=service).inc()
    fields = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "reason": kind,
        "error": error,
    }
    if producer is None:
        log.warning("message.rejected", extra={"fields": fields})
        return
    key = decode_key(record.key)
    dead = dead_letter(record, key=key, error=error, service=service, failed_at=time.time())
    # The dead letter stays in the trace of the message it rejects.
    token = otel_context.attach(extract_trace_context(tuple(record.headers or ())))
    try:
        await producer.send(topic.dlq, key, dead)
    except Exception as exc:  # noqa: BLE001 - one message must never stop its partition
        DEAD_LETTERS_FAILED.labels(topic=record.topic, service=service).inc()
        log.error(
            "message.dead_letter_failed",
            extra={"fields": {**fields, "dlq_error": f"{type(exc).__name__}: {exc}"[:DLQ_ERROR_MAX_CHARS]}},
        )
        return
    finally:
        otel_context.detach(token)
    log.warning("message.dead_lettered", extra={"fields": fields})


def dead_letter(
    record: ConsumerRecord[bytes, bytes], *, key: str | None, error: str, service: str, failed_at: float
) -> DeadLetterEvent:
    """The DLQ copy of a rejected record: its value cut to DLQ_VALUE_MAX_BYTES, with size and SHA-256 of the whole."""
    raw = record.value or b""
    text = raw.decode("utf-8", errors="replace")
    encoded = text.encode("utf-8")
    truncated = len(encoded) > DLQ_VALUE_MAX_BYTES
    if truncated:
        text = encoded[:DLQ_VALUE_MAX_BYTES].decode("utf-8", errors="ignore")  # no half character at the cut
    return DeadLetterEvent(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=key,
        value=text,
        error=error[:DLQ_ERROR_MAX_CHARS],
        service=service,
        failed_at=failed_at,
        value_size=len(raw),
        value_sha256=hashlib.sha256(raw).hexdigest(),
        value_truncated=truncated,
    )
