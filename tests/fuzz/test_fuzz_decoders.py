"""Every topic's decoder on arbitrary and near-valid bytes: no crash; a rejection names the field,
lands in the topic's DLQ and is counted in topoplace_messages_dead_lettered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import msgspec
import pytest
from aiokafka.structs import ConsumerRecord
from fuzz_profile import FUZZ
from hypothesis import given
from hypothesis import strategies as st
from json_strategies import ANY_JSON, events_of, near_valid
from prometheus_client import REGISTRY

import schemas.topics
from schemas.events import DeadLetterEvent, Event
from schemas.topics import Topic
from topoplace.event_checks import InvalidEvent, check_event
from topoplace.kafka.records import Received, RecordProcessor
from topoplace.kafka.wire import DecodeError, RejectReason, decode_event

TOPICS = [pytest.param(t, id=t.name) for t in schemas.topics.ALL]
SERVICE = "fuzz"
KINDS = {RejectReason.MALFORMED_JSON, RejectReason.INVALID_FIELD, RejectReason.UNKNOWN_SCHEMA_VERSION}

ARBITRARY = st.one_of(
    st.binary(max_size=200),
    ANY_JSON.map(msgspec.json.encode),
    st.text(max_size=100).map(str.encode),
)


def field_named(topic: Topic, error: str) -> str:
    """The field an error names: the top-level field of its path, or `value` for the whole message."""
    path, sep, reason = error.partition(": ")
    assert sep and path and reason, f"no 'field: reason' in {error!r}"
    return path.split(".")[0].split("[")[0]


def check_decoded(topic: Topic, value: bytes) -> Event | None:
    """Decodes or raises DecodeError naming a field of the topic's event (or `value`); nothing else."""
    try:
        return decode_event(topic, value)
    except DecodeError as exc:
        assert exc.kind in KINDS
        names = {f.encode_name for f in msgspec.structs.fields(topic.event)} | {"value", "schema_version"}
        assert field_named(topic, exc.error) in names, exc.error
        return None


@pytest.mark.parametrize("topic", TOPICS)
@FUZZ
@given(value=ARBITRARY)
def test_arbitrary_bytes_decode_or_are_rejected_by_field(topic: Topic, value: bytes) -> None:
    check_decoded(topic, value)


@pytest.mark.parametrize("topic", TOPICS)
@FUZZ
@given(data=st.data())
def test_near_valid_events_decode_or_are_rejected_by_field(topic: Topic, data: st.DataObject) -> None:
    check_decoded(topic, data.draw(near_valid(topic.event)))


@pytest.mark.parametrize("topic", TOPICS)
@FUZZ
@given(data=st.data())
def test_generated_valid_events_round_trip(topic: Topic, data: st.DataObject) -> None:
    """The valid-event strategy is what the decoder accepts (else near-valid inputs test little)."""
    raw = msgspec.json.encode(data.draw(events_of(topic.event)))
    try:
        event = decode_event(topic, raw)
    except DecodeError as exc:
        # A generated string may miss a pattern or a cross-field rule; that rejection must name it too.
        assert exc.kind == RejectReason.INVALID_FIELD, exc.error
        return
    assert isinstance(event, topic.event)
    assert decode_event(topic, msgspec.json.encode(event)) == event


class CapturingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None, object]] = []

    async def send(self, topic: str, key: str | None, event: object) -> None:
        self.sent.append((topic, key, event))


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def dead_lettered(topic: Topic, kind: str) -> float:
    labels = {"topic": topic.name, "reason": kind, "service": SERVICE}
    return REGISTRY.get_sample_value("topoplace_messages_dead_lettered_total", labels) or 0.0


@pytest.mark.parametrize("topic", TOPICS)
@FUZZ
@given(data=st.data())
def test_a_consumer_dead_letters_and_counts_every_bad_message(
    loop: asyncio.AbstractEventLoop, topic: Topic, data: st.DataObject
) -> None:
    value = data.draw(st.one_of(ARBITRARY, near_valid(topic.event)))
    producer = CapturingProducer()
    processor = RecordProcessor([topic], SERVICE, producer)  # type: ignore[arg-type]  # only send() is used
    handled: list[Received] = []

    async def handler(received: Received) -> None:
        handled.append(received)

    try:
        check_event(topic.name, "key-1", decode_event(topic, value))
        kind = None
    except DecodeError as exc:
        kind = exc.kind
    except InvalidEvent:
        kind = RejectReason.INVALID_EVENT  # keyed `key-1`: no compacted event names that
    before = dead_lettered(topic, kind) if kind else 0.0
    record = ConsumerRecord(topic.name, 0, 7, 0, 0, b"key-1", value, None, len(b"key-1"), len(value), [])
    loop.run_until_complete(processor.process(record, handler))
    if kind is None:
        assert len(handled) == 1 and not producer.sent
        return
    # A rejected record of a compacted topic is a tombstone of its key for the handler.
    assert [(h.key, h.event) for h in handled] == ([("key-1", None)] if topic.compacted else [])
    assert dead_lettered(topic, kind) == before + 1
    [(dlq, key, letter)] = producer.sent
    assert dlq == topic.dlq and key == "key-1"
    assert isinstance(letter, DeadLetterEvent)
    if kind == RejectReason.INVALID_EVENT:
        return
    assert field_named(topic, letter.error)
