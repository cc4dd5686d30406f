"""EventProducer / EventConsumer / TopicFollower against a real broker."""

from __future__ import annotations

import asyncio
import uuid

import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError
from infra_helpers import dlq_of, metric, produce_raw, running
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from schemas import events
from schemas.topics import Topic
from topoplace.config import Settings
from topoplace.kafka.consumer import EventConsumer
from topoplace.kafka.follower import TopicFollower, latest_by_key, read_compacted
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received
from topoplace.kafka.wire import RejectReason
from topoplace.telemetry import read_spans, setup_tracing, shutdown_tracing

WAIT = 15.0  # seconds; generous for a loaded 2-core machine, never reached when things work


def pending(uid: str, **extra: object) -> events.PendingPodEvent:
    return events.PendingPodEvent(
        uid=uid,
        namespace="ml",
        name=f"trainer-{uid}",
        resource_version="7",
        requests={"nvidia.com/gpu": "2", "nvidia.com/gpumem": "8000"},
        gang=events.GangRef(name="ml/job", min_member=2),
        **extra,  # type: ignore[arg-type]
    )


def group() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


async def test_round_trip_keeps_event_key_and_trace(kafka_bootstrap: str, pending_topic: Topic, tmp_path) -> None:  # type: ignore[no-untyped-def]
    service = f"test-producer-{uuid.uuid4().hex[:6]}"
    traces = tmp_path / "traces.jsonl"
    provider = setup_tracing(service, Settings(traces_file=str(traces)), set_global=False)
    event = pending("uid-1")
    received: asyncio.Queue[Received] = asyncio.Queue()
    async with EventProducer(kafka_bootstrap, service=service) as producer:
        with provider.get_tracer("test").start_as_current_span("collector.observe") as origin:
            await producer.send(pending_topic, "uid-1", event)
        current_in_handler: list[trace.SpanContext] = []

        async def handle(message: Received) -> None:
            current_in_handler.append(trace.get_current_span().get_span_context())
            await received.put(message)

        consumer = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=group(), service="test-consumer", producer=producer
        )
        async with running(consumer, handle):
            message = await asyncio.wait_for(received.get(), WAIT)
    shutdown_tracing(service)

    assert message.event == event
    assert isinstance(message.event, events.PendingPodEvent)
    assert message.key == "uid-1"
    assert message.topic == pending_topic.name
    assert message.timestamp_ms > 0
    assert any(name == "traceparent" for name, _ in message.headers)

    remote = trace.get_current_span(message.trace_context).get_span_context()
    assert remote.is_valid and remote.is_remote
    assert remote.trace_id == origin.get_span_context().trace_id
    assert current_in_handler == [remote]  # the handler runs inside the producer's context
    # The producer's send span sits between the origin and the consumer.
    (send,) = [s for s in read_spans(str(traces)) if s.name == f"send {pending_topic.name}"]
    assert send.parent_id == f"{origin.get_span_context().span_id:016x}"
    assert int(send.span_id, 16) == remote.span_id
    assert send.service_name == service
    assert send.attributes["messaging.destination.name"] == pending_topic.name

    assert metric("topoplace_messages_produced_total", topic=pending_topic.name, service=service) == 1
    assert metric("topoplace_messages_consumed_total", topic=pending_topic.name, service="test-consumer") == 1
    assert metric("topoplace_handler_seconds_count", topic=pending_topic.name, service="test-consumer") == 1


async def test_bad_messages_go_to_the_dlq_naming_the_field_and_the_stream_goes_on(
    kafka_bootstrap: str, pending_topic: Topic
) -> None:
    good = msgspec.json.encode(pending("good-1"))
    last = msgspec.json.encode(pending("good-2"))
    as_dict = msgspec.to_builtins(pending("x"))
    wrong_type = msgspec.json.encode({**as_dict, "resource_version": 7})
    nested = msgspec.json.encode({**as_dict, "gang": {"name": "ml/job", "min_member": "two"}})
    future = msgspec.json.encode({**as_dict, "schema_version": 99})
    missing = msgspec.json.encode({k: v for k, v in as_dict.items() if k != "uid"})
    # One key: one partition, so the order below is the order of consumption.
    await produce_raw(
        kafka_bootstrap,
        pending_topic.name,
        [
            ("k", good),
            ("k", b"{not json"),
            ("k", wrong_type),
            ("k", nested),
            ("k", future),
            ("k", missing),
            ("k", last),
        ],
    )
    handled: list[Received] = []
    done = asyncio.Event()

    async def handle(message: Received) -> None:
        handled.append(message)
        if message.offset == 6:
            done.set()

    async with EventProducer(kafka_bootstrap, service="test-dlq") as producer:
        consumer = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=group(), service="test-dlq", producer=producer
        )
        async with running(consumer, handle):
            await asyncio.wait_for(done.wait(), WAIT)

    assert [m.offset for m in handled] == [0, 6]
    dead = [m.event for m in await read_compacted(kafka_bootstrap, dlq_of(pending_topic))]
    assert all(isinstance(d, events.DeadLetterEvent) for d in dead)
    by_offset = {d.offset: d for d in dead if isinstance(d, events.DeadLetterEvent)}
    assert sorted(by_offset) == [1, 2, 3, 4, 5]
    assert by_offset[1].error.startswith("value: not JSON")
    assert by_offset[1].value == "{not json"
    assert by_offset[2].error.startswith("resource_version:") and "`str`" in by_offset[2].error
    assert by_offset[3].error.startswith("gang.min_member:") and "`int`" in by_offset[3].error
    assert by_offset[4].error.startswith("schema_version:") and "99" in by_offset[4].error
    assert by_offset[5].error == "uid: required field is missing"
    for d in by_offset.values():
        assert d.topic == pending_topic.name and d.key == "k" and d.service == "test-dlq" and d.failed_at > 0

    def rejected(reason: str) -> float:
        return metric(
            "topoplace_messages_dead_lettered_total", topic=pending_topic.name, reason=reason, service="test-dlq"
        )

    assert rejected(RejectReason.MALFORMED_JSON) == 1
    assert rejected(RejectReason.INVALID_FIELD) == 3
    assert rejected(RejectReason.UNKNOWN_SCHEMA_VERSION) == 1


async def test_a_failing_handler_dead_letters_the_message_and_commits_past_it(
    kafka_bootstrap: str, pending_topic: Topic
) -> None:
    the_group = group()
    handled: list[str] = []
    second_seen = asyncio.Event()

    async def handle(message: Received) -> None:
        assert isinstance(message.event, events.PendingPodEvent)
        if message.event.uid == "poison":
            raise RuntimeError("cannot place poison")
        handled.append(message.event.uid)
        second_seen.set()

    origin_tracer = TracerProvider().get_tracer("test")  # no exporter: only its ids matter
    async with EventProducer(kafka_bootstrap, service="test-poison") as producer:
        with origin_tracer.start_as_current_span("origin") as origin:
            await producer.send(pending_topic, "k", pending("poison"))
        await producer.send(pending_topic, "k", pending("fine"))
        consumer = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=the_group, service="test-poison", producer=producer
        )
        async with running(consumer, handle):
            await asyncio.wait_for(second_seen.wait(), WAIT)
        assert handled == ["fine"]

        # Both offsets were committed: the group's next member sees only new messages.
        await producer.send(pending_topic, "k", pending("after"))
        second_seen.clear()
        again = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=the_group, service="test-poison", producer=producer
        )
        async with running(again, handle):
            await asyncio.wait_for(second_seen.wait(), WAIT)
    assert handled == ["fine", "after"]

    (dead_message,) = await read_compacted(kafka_bootstrap, dlq_of(pending_topic))
    dead = dead_message.event
    assert isinstance(dead, events.DeadLetterEvent)
    # The dead letter stays in the trace of the message it rejects.
    dead_trace = trace.get_current_span(dead_message.trace_context).get_span_context()
    assert dead_trace.trace_id == origin.get_span_context().trace_id
    assert dead.offset == 0 and dead.error == "handler: RuntimeError: cannot place poison"
    assert (
        metric(
            "topoplace_messages_dead_lettered_total",
            topic=pending_topic.name,
            reason=RejectReason.HANDLER_ERROR,
            service="test-poison",
        )
        == 1
    )


async def test_offset_is_committed_only_after_the_handler_returns(kafka_bootstrap: str, pending_topic: Topic) -> None:
    the_group = group()
    async with EventProducer(kafka_bootstrap, service="test-commit") as producer:
        await producer.send(pending_topic, "k", pending("first"))

        # A member that never finishes its handler: stopped (cancelled) mid-message.
        entered = asyncio.Event()

        async def stuck(message: Received) -> None:
            entered.set()
            await asyncio.Future()  # never completes

        stuck_member = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=the_group, service="test-commit", producer=producer
        )
        async with running(stuck_member, stuck, grace=0.1):
            await asyncio.wait_for(entered.wait(), WAIT)

        # The next member of the group gets the same message again, and finishes it.
        redelivered: asyncio.Queue[Received] = asyncio.Queue()
        member = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=the_group, service="test-commit", producer=producer
        )
        async with running(member, redelivered.put):
            first = await asyncio.wait_for(redelivered.get(), WAIT)
        assert isinstance(first.event, events.PendingPodEvent) and first.event.uid == "first"
        assert first.offset == 0

        # Finished means committed: a third member starts after it.
        await producer.send(pending_topic, "k", pending("second"))
        third: asyncio.Queue[Received] = asyncio.Queue()
        member = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=the_group, service="test-commit", producer=producer
        )
        async with running(member, third.put):
            nxt = await asyncio.wait_for(third.get(), WAIT)
        assert isinstance(nxt.event, events.PendingPodEvent) and nxt.event.uid == "second"
        assert third.empty()


def status(node: str, *, ready: bool = True) -> events.NodeStatusEvent:
    return events.NodeStatusEvent(node=node, labels={"zone": "a"}, ready=ready)


async def test_follower_catches_up_delivers_tombstones_and_replays_from_zero(
    kafka_bootstrap: str, compacted_topic: Topic
) -> None:
    async with EventProducer(kafka_bootstrap, service="test-follow") as producer:
        await producer.send(compacted_topic, "node-a", status("node-a"))
        await producer.send(compacted_topic, "node-b", status("node-b"))
        await producer.send(compacted_topic, "node-a", status("node-a", ready=False))
        await producer.send(compacted_topic, "node-b", None)  # tombstone
        written = 4

        seen: list[Received] = []
        later_arrived = asyncio.Event()
        follower = TopicFollower(kafka_bootstrap, [compacted_topic], service="test-follow")

        async def collect(message: Received) -> None:
            seen.append(message)
            if message.key == "node-c":
                later_arrived.set()

        async with running(follower, collect):
            await asyncio.wait_for(follower.caught_up.wait(), WAIT)
            at_catch_up = list(seen)
            # It goes on following: a message written after the catch-up arrives too.
            await producer.send(compacted_topic, "node-c", status("node-c"))
            await asyncio.wait_for(later_arrived.wait(), WAIT)

    assert len(at_catch_up) == written
    tombstones = [m for m in at_catch_up if m.event is None]
    assert [(m.key, m.event) for m in tombstones] == [("node-b", None)]
    view = latest_by_key(at_catch_up)
    assert set(view) == {"node-a"}
    assert view["node-a"].event == status("node-a", ready=False)
    assert seen[-1].key == "node-c"

    # A second follower replays everything from offset 0.
    replay = TopicFollower(kafka_bootstrap, [compacted_topic], service="test-follow")
    replayed: list[Received] = []

    async def collect_replay(message: Received) -> None:
        replayed.append(message)

    async with running(replay, collect_replay):
        await asyncio.wait_for(replay.caught_up.wait(), WAIT)
    assert sorted((m.partition, m.offset) for m in replayed) == sorted((m.partition, m.offset) for m in seen)


async def test_a_follower_whose_end_is_never_reached_declares_itself_caught_up_in_time(
    kafka_bootstrap: str, compacted_topic: Topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a restarted broker once did: it reports an end offset that no fetch ever reaches.
    real_end_offsets = AIOKafkaConsumer.end_offsets

    async def unreachable_ends(self: AIOKafkaConsumer, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        ends = await real_end_offsets(self, partitions)
        return {tp: end + 1 for tp, end in ends.items()}

    monkeypatch.setattr(AIOKafkaConsumer, "end_offsets", unreachable_ends)
    service = f"test-stuck-{uuid.uuid4().hex[:6]}"
    follower = TopicFollower(kafka_bootstrap, [compacted_topic], service=service, catch_up_timeout=0.5)
    assert follower.waiting_reason() == "not connected to the broker yet"

    async def ignore(message: Received) -> None:
        pass

    reasons: list[str | None] = []
    async with running(follower, ignore):
        await asyncio.wait_for(follower.caught_up.wait(), WAIT)
        reasons.append(follower.waiting_reason())
    assert reasons == [None]
    assert metric("topoplace_follower_catch_up_given_up_total", service=service) == 1


async def test_a_follower_says_what_it_waits_for(
    kafka_bootstrap: str, compacted_topic: Topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_end_offsets = AIOKafkaConsumer.end_offsets
    real_beginning_offsets = AIOKafkaConsumer.beginning_offsets
    asked = asyncio.Event()

    async def unreachable_ends(self: AIOKafkaConsumer, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        ends = await real_end_offsets(self, partitions)
        return {tp: end + 5 for tp, end in ends.items()}

    async def beginnings(self: AIOKafkaConsumer, *partitions: TopicPartition) -> dict[TopicPartition, int]:
        starts: dict[TopicPartition, int] = await real_beginning_offsets(self, *partitions)
        asked.set()  # the follower goes on up to its first fetch before this test runs again
        return starts

    monkeypatch.setattr(AIOKafkaConsumer, "end_offsets", unreachable_ends)
    monkeypatch.setattr(AIOKafkaConsumer, "beginning_offsets", beginnings)
    follower = TopicFollower(kafka_bootstrap, [compacted_topic], service="test-waiting", catch_up_timeout=600)

    async def ignore(message: Received) -> None:
        pass

    async with running(follower, ignore):
        await asyncio.wait_for(asked.wait(), WAIT)
        reason = follower.waiting_reason()
    assert reason is not None
    assert reason.startswith("catching up on") and compacted_topic.name in reason
    assert not follower.caught_up.is_set()


async def test_two_members_share_the_partitions_and_the_survivor_takes_over(
    kafka_bootstrap: str, pending_topic: Topic
) -> None:
    the_group = group()
    by_member: dict[str, list[str]] = {"a": [], "b": []}
    all_seen: set[str] = set()
    wanted: set[str] = set()
    complete = asyncio.Event()

    def handler(member: str):  # type: ignore[no-untyped-def]
        async def handle(message: Received) -> None:
            assert isinstance(message.event, events.PendingPodEvent)
            by_member[member].append(message.event.uid)
            all_seen.add(message.event.uid)
            if wanted <= all_seen:
                complete.set()

        return handle

    def new_member() -> EventConsumer:
        return EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=the_group, service="test-share", producer=producer
        )

    async with EventProducer(kafka_bootstrap, service="test-share") as producer:
        a, b = new_member(), new_member()
        async with running(b, handler("b")):
            async with running(a, handler("a")):
                await asyncio.wait_for(a.assigned.wait(), WAIT)
                await asyncio.wait_for(b.assigned.wait(), WAIT)
                wanted.update(f"pod-{i}" for i in range(24))
                for uid in sorted(wanted):
                    await producer.send(pending_topic, uid, pending(uid))
                await asyncio.wait_for(complete.wait(), WAIT)
            assert by_member["a"] and by_member["b"], by_member
            assert sorted(by_member["a"] + by_member["b"]) == sorted(wanted)  # each once

            # a left: b alone gets every new message, whatever partition it lands on.
            complete.clear()
            later = {f"late-{i}" for i in range(12)}
            wanted.update(later)
            for uid in sorted(later):
                await producer.send(pending_topic, uid, pending(uid))
            await asyncio.wait_for(complete.wait(), WAIT)
    assert later <= set(by_member["b"])


async def test_a_follower_of_a_missing_topic_names_it(kafka_bootstrap: str) -> None:
    missing = Topic(name=f"missing.{uuid.uuid4().hex[:8]}", event=events.NodeStatusEvent, key="node", compacted=True)
    follower = TopicFollower(kafka_bootstrap, [missing], service="test-missing")

    async def never(message: Received) -> None:
        raise AssertionError("nothing to read")

    with pytest.raises(LookupError, match=missing.name):
        await asyncio.wait_for(follower.run(never), WAIT)


async def test_stop_before_run_makes_run_return_at_once(kafka_bootstrap: str, pending_topic: Topic) -> None:
    async with EventProducer(kafka_bootstrap, service="test-stop") as producer:
        consumer = EventConsumer(
            kafka_bootstrap, [pending_topic], group_id=group(), service="test-stop", producer=producer
        )
        await consumer.stop()

        async def never(message: Received) -> None:
            raise AssertionError("stopped before running")

        await asyncio.wait_for(consumer.run(never), WAIT)
        assert not consumer.assigned.is_set()


async def test_sending_without_start_is_an_error(kafka_bootstrap: str, pending_topic: Topic) -> None:
    producer = EventProducer(kafka_bootstrap, service="test-unstarted")
    with pytest.raises(IllegalStateError, match="not started"):
        await producer.send(pending_topic, "k", pending("x"))


async def test_idempotence_asked_of_the_embedded_broker_is_turned_off_and_sends_work(
    kafka_bootstrap: str, pending_topic: Topic
) -> None:
    from topoplace.kafka.broker_kind import is_embedded

    if not await is_embedded(kafka_bootstrap):
        pytest.skip("only the embedded broker lacks idempotent producers")
    async with EventProducer(kafka_bootstrap, service="test", idempotence=True) as producer:
        assert producer.idempotence is False
        await producer.send(pending_topic, "u-idem", pending("u-idem"))
    messages = await read_compacted(kafka_bootstrap, pending_topic)
    assert [m.key for m in messages] == ["u-idem"]


async def test_concurrent_window_starts_in_offset_order_and_commits_only_when_all_are_done(
    kafka_bootstrap: str, pending_topic: Topic
) -> None:
    the_group = group()
    uids = [f"w{i}" for i in range(4)]
    async with EventProducer(kafka_bootstrap, service="test-window") as producer:
        for uid in uids:
            await producer.send(pending_topic, "one-partition", pending(uid))

        # The first message never finishes; the other three finish at once.
        started: list[str] = []
        all_started = asyncio.Event()

        async def first_stuck(message: Received) -> None:
            assert isinstance(message.event, events.PendingPodEvent)
            started.append(message.event.uid)
            if len(started) == len(uids):
                all_started.set()
            if message.event.uid == "w0":
                await asyncio.Future()

        member = EventConsumer(
            kafka_bootstrap,
            [pending_topic],
            group_id=the_group,
            service="test-window",
            producer=producer,
            concurrency=4,
        )
        async with running(member, first_stuck, grace=0.1):
            await asyncio.wait_for(all_started.wait(), WAIT)
        assert started == uids  # all in flight together, started in offset order

        # Nothing was committed: the window's first message was never done.
        again: list[str] = []
        all_again = asyncio.Event()

        async def record(message: Received) -> None:
            assert isinstance(message.event, events.PendingPodEvent)
            again.append(message.event.uid)
            if len(again) == len(uids):
                all_again.set()

        member = EventConsumer(
            kafka_bootstrap,
            [pending_topic],
            group_id=the_group,
            service="test-window",
            producer=producer,
            concurrency=4,
        )
        async with running(member, record):
            await asyncio.wait_for(all_again.wait(), WAIT)
        assert again == uids


def test_concurrency_must_be_positive(kafka_bootstrap: str, pending_topic: Topic) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        EventConsumer(
            kafka_bootstrap,
            [pending_topic],
            group_id="g",
            service="s",
            producer=EventProducer(kafka_bootstrap, service="s"),
            concurrency=0,
        )


async def test_read_compacted_returns_every_record_of_a_batch_sent_at_once(
    kafka_bootstrap: str, compacted_topic: Topic
) -> None:
    # Sent concurrently, the five land in one record batch of one partition.
    async with EventProducer(kafka_bootstrap, service="test-batch") as producer:
        await asyncio.gather(*(producer.send(compacted_topic, "same-key", status(f"n{i}")) for i in range(5)))
    messages = await read_compacted(kafka_bootstrap, compacted_topic)
    nodes = [m.event.node for m in messages if isinstance(m.event, events.NodeStatusEvent)]
    assert sorted(nodes) == [f"n{i}" for i in range(5)]
    latest = latest_by_key(messages)["same-key"].event
    assert isinstance(latest, events.NodeStatusEvent) and latest.node == nodes[-1]
