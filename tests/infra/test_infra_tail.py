"""`topoplace topics tail`: each message of a topic, decoded, one JSON line each."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid

import msgspec
import pytest
from aiokafka import AIOKafkaProducer, ConsumerRecord

from schemas import topics
from schemas.events import BindingEvent, BindingOutcome, DeadLetterEvent
from topoplace.cli import main
from topoplace.kafka.producer import EventProducer
from topoplace.tail import Start, TailLine, tail, tail_line, topic_named

LIMIT_S = 30.0  # a bound on waiting for the broker, not a synchronisation


def binding(uid: str) -> BindingEvent:
    return BindingEvent(decision_id="d", uid=uid, namespace="default", name=uid, outcome=BindingOutcome.BOUND, node="n")


def record(value: bytes | None, key: bytes | None = b"k") -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic="bindings", partition=3, offset=7, timestamp=1234, timestamp_type=0, key=key, value=value,
        checksum=None, serialized_key_size=1, serialized_value_size=0, headers=(),
    )  # fmt: skip


def test_topic_names_and_their_dead_letter_topics_are_known() -> None:
    assert topic_named("bindings") is topics.BINDINGS
    assert topic_named("bindings.dlq").event is DeadLetterEvent
    with pytest.raises(ValueError, match=r"no topic 'bindingz' \(topics: topology.nodes"):
        topic_named("bindingz")


def test_a_line_holds_the_decoded_event_or_why_it_is_not_one() -> None:
    good = tail_line(topics.BINDINGS, record(msgspec.json.encode(binding("u1"))))
    assert (good.topic, good.partition, good.offset, good.key, good.timestamp_ms) == ("bindings", 3, 7, "k", 1234)
    assert good.event["uid"] == "u1" and good.error == ""
    bad = tail_line(topics.BINDINGS, record(b'{"uid": 5}'))
    assert bad.event is None and bad.error.startswith("uid: expected `str`")
    tombstone = tail_line(topics.BINDINGS, record(None))
    assert tombstone.event is None and tombstone.error == ""


async def test_tail_from_the_beginning_prints_old_and_bad_messages(kafka_bootstrap: str) -> None:
    uid = f"tail-{uuid.uuid4()}"
    async with EventProducer(kafka_bootstrap, service="test-tail") as producer:
        await producer.send(topics.BINDINGS, uid, binding(uid))
    raw = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await raw.start()
    try:
        await raw.send_and_wait("bindings", b"not json", key=uid.encode())
    finally:
        await raw.stop()

    lines: list[TailLine] = []
    stop = asyncio.Event()

    def emit(line: TailLine) -> None:
        if line.key == uid:
            lines.append(line)
        if len(lines) == 2:
            stop.set()

    await asyncio.wait_for(tail(kafka_bootstrap, topics.BINDINGS, Start.BEGINNING, emit, stop), LIMIT_S)
    decoded, broken = lines
    assert decoded.event["uid"] == uid and decoded.event["outcome"] == "bound"
    assert broken.event is None and broken.error.startswith("value: not JSON")


async def test_tail_from_the_end_prints_only_what_arrives_after_it_started(kafka_bootstrap: str) -> None:
    old, new = f"old-{uuid.uuid4()}", f"new-{uuid.uuid4()}"
    seen: list[str | None] = []
    stop, ready = asyncio.Event(), asyncio.Event()

    def emit(line: TailLine) -> None:
        seen.append(line.key)
        if line.key == new:
            stop.set()

    async with EventProducer(kafka_bootstrap, service="test-tail") as producer:
        await producer.send(topics.BINDINGS, old, binding(old))
        task = asyncio.create_task(tail(kafka_bootstrap, topics.BINDINGS, Start.END, emit, stop, ready=ready))
        await asyncio.wait_for(ready.wait(), LIMIT_S)
        await producer.send(topics.BINDINGS, new, binding(new))
        await asyncio.wait_for(task, LIMIT_S)
    assert new in seen and old not in seen


def test_tail_needs_kafka_bootstrap(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    assert main(["topics", "tail", "bindings"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KAFKA_BOOTSTRAP is not set" in err


def test_tail_of_an_unknown_topic_is_bad_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "127.0.0.1:9")  # never reached: the name is checked first
    assert main(["topics", "tail", "nope"]) == 2
    assert "no topic 'nope'" in capsys.readouterr().err


async def test_the_command_prints_one_json_line_per_event_until_interrupted(kafka_bootstrap: str) -> None:
    uid = f"cli-{uuid.uuid4()}"
    async with EventProducer(kafka_bootstrap, service="test-tail") as producer:
        await producer.send(topics.BINDINGS, uid, binding(uid))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "topoplace.cli", "topics", "tail", "bindings", "--from", "beginning",
        env={**os.environ, "KAFKA_BOOTSTRAP": kafka_bootstrap},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        while True:
            line = json.loads(await asyncio.wait_for(process.stdout.readline(), LIMIT_S))
            if line["key"] == uid:
                break
    finally:
        process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), LIMIT_S)
    assert line["event"]["uid"] == uid and line["topic"] == "bindings"
    assert code == 0
