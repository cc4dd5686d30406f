"""Kafka edges of every service: consume events at least once, replay compacted topics.

Producing lives in topoplace.kafka_producer (EventProducer is re-exported here).

Tracing choice: trace context is propagated by hand with
opentelemetry.propagate.inject/extract, not by opentelemetry-instrumentation-aiokafka.
That instrumentation's consumer span ends when getone/getmany returns, before
the handler runs, so handler spans would not be its children; and it patches
aiokafka process-wide, which would inject a second traceparent next to ours.
By hand, each message's context is extracted once and handed to the handler
in `Received.trace_context`, and the handler opens its processing span there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError
from prometheus_client import Counter

from schemas.topics import Topic
from topoplace.kafka import broker_kind
from topoplace.kafka_producer import EventProducer
from topoplace.kafka_records import (
    DEAD_LETTERS_FAILED,
    DLQ_ERROR_MAX_CHARS,
    DLQ_VALUE_MAX_BYTES,
    HANDLER_SECONDS,
    MESSAGES_CONSUMED,
    MESSAGES_DEAD_LETTERED,
    Handler,
    Received,
    RecordProcessor,
    dead_letter,
)
from topoplace.kafka_security import KafkaSecurity, client_options
from topoplace.kafka_wire import (
    DecodeError,
    RejectReason,
    decode_event,
    extract_trace_context,
    trace_headers,
)

__all__ = [
    "DEAD_LETTERS_FAILED",
    "DLQ_ERROR_MAX_CHARS",
    "DLQ_VALUE_MAX_BYTES",
    "HANDLER_SECONDS",
    "MESSAGES_CONSUMED",
    "MESSAGES_DEAD_LETTERED",
    "DecodeError",
    "EndWentBack",
    "EventConsumer",
    "EventProducer",
    "Handler",
    "Received",
    "RejectReason",
    "TopicFollower",
    "dead_letter",
    "decode_event",
    "ends_gone_back",
    "extract_trace_context",
    "latest_by_key",
    "read_compacted",
    "trace_headers",
    "watch_for_data_loss",
]

log = logging.getLogger(__name__)

# A fetch that finds nothing waits this long on the broker. The client default (500 ms) is
# paid by every hop of a pod's path when the embedded broker holds fetches to the limit;
# 50 ms keeps a pod's pending -> bound latency low for a few idle polls per second.
FETCH_MAX_WAIT_MS = 50

# A follower that has not reached the end offsets it read at start within this time declares
# itself caught up anyway: a restarted broker once reported an end that no fetch reached.
CATCH_UP_TIMEOUT_S = 30.0

# --- metrics (default registry; served by topoplace.health) ----------------------------------

CATCH_UP_GIVEN_UP = Counter(
    "topoplace_follower_catch_up_given_up",
    "Followers that declared themselves caught up at their time limit, short of the end offsets",
    ["service"],
)


class _StoppableLoop:
    """run()/stop() plumbing: stop() lets the current message finish, then cancels after a grace."""

    def __init__(self) -> None:
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def stop(self, grace: float = 10.0) -> None:
        self._stopping.set()
        task = self._task
        if task is None or task.done() or task is asyncio.current_task():
            return
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            task.cancel()
            await asyncio.wait({task})

    async def _fetch(
        self, consumer: AIOKafkaConsumer, timeout_ms: int = 1000
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] | None:
        """The next batch, or None once stop() was called."""
        if self._stopping.is_set():
            return None
        fetch = asyncio.ensure_future(consumer.getmany(timeout_ms=timeout_ms))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({fetch, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not fetch.done():
                fetch.cancel()  # uncommitted, so whatever it held is read again later
        if self._stopping.is_set() and not fetch.done():
            return None
        return fetch.result() if not fetch.cancelled() else None


class EventConsumer(_StoppableLoop):
    """Reads topics as a member of a consumer group, at least once.

    The offset of a message is committed only after the handler returned (or
    the message was durably dead-lettered), so a crash anywhere before that
    makes the group read it again.
    """

    def __init__(
        self,
        bootstrap: str,
        topics: Sequence[Topic],
        *,
        group_id: str,
        service: str,
        producer: EventProducer,
        from_beginning: bool = True,
        session_timeout_ms: int | None = None,
        concurrency: int = 1,
        security: KafkaSecurity | None = None,
    ) -> None:
        super().__init__()
        if concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, got {concurrency}")
        self.concurrency = concurrency
        self.security = security
        self.session_timeout_ms = session_timeout_ms
        self.bootstrap = bootstrap
        self.topics = tuple(topics)
        self.group_id = group_id
        self.service = service
        self.from_beginning = from_beginning
        self._processor = RecordProcessor(self.topics, service, producer)
        self.started = asyncio.Event()  # set once connected and subscribed
        # Set while this member holds its share of the partitions (possibly none,
        # when the group has more members than partitions); cleared during a rebalance.
        self.assigned = asyncio.Event()
        self._listener = _AssignmentListener(self)

    async def run(self, handler: Handler) -> None:
        self._task = asyncio.current_task()
        if self._stopping.is_set():
            return
        session_timeout_ms = self.session_timeout_ms or await broker_kind.group_session_timeout_ms(
            self.bootstrap, self.security
        )
        consumer = self.client(session_timeout_ms)
        consumer.subscribe([t.name for t in self.topics], listener=self._listener)
        try:
            await consumer.start()
            self.started.set()
            while (batches := await self._fetch(consumer)) is not None:
                # Partitions are independent streams: handle them concurrently, each in order.
                await asyncio.gather(
                    *(self._process_partition(consumer, tp, records, handler) for tp, records in batches.items())
                )
        finally:
            self.assigned.clear()
            membership = _membership(consumer)
            await consumer.stop()
            if membership is not None:
                await broker_kind.leave_group(self.bootstrap, *membership, security=self.security)

    def client(self, session_timeout_ms: int = broker_kind.KAFKA_SESSION_TIMEOUT_MS) -> AIOKafkaConsumer:
        """The aiokafka group consumer this reads with (not started)."""
        return AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group_id,
            client_id=self.service,
            enable_auto_commit=False,
            auto_offset_reset="earliest" if self.from_beginning else "latest",
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(100, session_timeout_ms // 4),
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            **client_options(self.security),
        )

    async def _process_partition(
        self,
        consumer: AIOKafkaConsumer,
        tp: TopicPartition,
        records: list[ConsumerRecord[bytes, bytes]],
        handler: Handler,
    ) -> None:
        # Up to `concurrency` records of a partition are in flight at once. Their tasks start in
        # offset order, so a handler's synchronous prefix (the placer's decision, the binder's
        # ledger hold) still runs in order; the offset is committed once the whole window is done.
        for start in range(0, len(records), self.concurrency):
            if self._stopping.is_set() or tp not in consumer.assignment():
                return  # revoked or stopping: the rest is read again by its owner
            window = records[start : start + self.concurrency]
            results = await asyncio.gather(
                *(self._processor.process(record, handler) for record in window), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result  # cancelled: uncommitted, read again
            await self._commit(consumer, tp, window[-1].offset + 1)

    async def _commit(self, consumer: AIOKafkaConsumer, tp: TopicPartition, next_offset: int) -> None:
        try:
            await consumer.commit({tp: next_offset})
        except CommitFailedError:
            # The group rebalanced under us: the new owner reads this message
            # again, which at-least-once handlers tolerate.
            log.warning(
                "commit.failed_rebalance",
                extra={"fields": {"topic": tp.topic, "partition": tp.partition, "offset": next_offset}},
            )


class _AssignmentListener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: EventConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.owner.assigned.clear()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info(
            "group.assigned",
            extra={
                "fields": {
                    "group": self.owner.group_id,
                    "partitions": sorted(f"{tp.topic}/{tp.partition}" for tp in assigned),
                }
            },
        )
        self.owner.assigned.set()


def _membership(consumer: AIOKafkaConsumer) -> tuple[str, str] | None:
    """(group, member id) when the consumer holds generation 0 of its group.

    Only Tansu has a generation 0 (Kafka starts at 1), and aiokafka sends
    LeaveGroup only from a generation > 0; without help, the next member waits a
    whole session timeout for this one to expire. Reads aiokafka's coordinator
    state, which it does not publish otherwise.
    """
    coordinator = getattr(consumer, "_coordinator", None)
    generation = getattr(coordinator, "generation", None)
    member_id = getattr(coordinator, "member_id", None)
    group_id = getattr(coordinator, "group_id", None)
    if generation == 0 and isinstance(member_id, str) and member_id and isinstance(group_id, str):
        return group_id, member_id
    return None


class TopicFollower(_StoppableLoop):
    """Reads every partition of topics from offset 0, forever, outside any consumer group.

    For rebuilding state from compacted topics: `caught_up` is set once every
    partition has been read up to the end offset it had when run() started.
    Each run reads everything again, so with a producer a bad message is
    dead-lettered again on every start.
    """

    def __init__(
        self,
        bootstrap: str,
        topics: Sequence[Topic],
        *,
        service: str,
        producer: EventProducer | None = None,
        catch_up_timeout: float = CATCH_UP_TIMEOUT_S,
        security: KafkaSecurity | None = None,
    ) -> None:
        super().__init__()
        self.security = security
        self.bootstrap = bootstrap
        self.topics = tuple(topics)
        self.service = service
        self.catch_up_timeout = catch_up_timeout
        self._processor = RecordProcessor(self.topics, service, producer)
        self.caught_up = asyncio.Event()
        # Partition -> (position reached, end to reach); None until the ends are known.
        self._progress: dict[TopicPartition, tuple[int, int]] | None = None

    def client(self) -> AIOKafkaConsumer:
        """The aiokafka consumer this follows with, outside any group (not started)."""
        return AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            client_id=self.service,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            **client_options(self.security),
        )

    def waiting_reason(self) -> str | None:
        """Why the follower is not caught up yet (for /readyz); None once it is."""
        if self.caught_up.is_set():
            return None
        if self._progress is None:
            return "not connected to the broker yet"
        behind = ", ".join(
            f"{tp.topic}/{tp.partition} at {position} of {end}"
            for tp, (position, end) in sorted(self._progress.items())
        )
        return f"catching up on {behind}"

    async def run(self, handler: Handler) -> None:
        await self._follow(handler, stop_at_end=False)

    async def _follow(self, handler: Handler, *, stop_at_end: bool) -> None:
        self._task = asyncio.current_task()
        if self._stopping.is_set():
            return
        consumer = self.client()
        try:
            await consumer.start()
            partitions = await _all_partitions(consumer, self.topics)
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            ends = await consumer.end_offsets(partitions)
            starts = await consumer.beginning_offsets(partitions)
            pending = {tp: end for tp, end in ends.items() if end > starts[tp]}
            self._progress = {tp: (starts[tp], end) for tp, end in pending.items()}
            if not pending:
                self.caught_up.set()
            deadline = time.monotonic() + self.catch_up_timeout
            while not (stop_at_end and self.caught_up.is_set()):
                batches = await self._fetch(consumer, timeout_ms=200 if pending else 1000)
                if batches is None:
                    return
                # Every record fetched is handled, also past the end read at start: the
                # embedded broker reports a partition's end as its last batch's first
                # offset + 1, so the rest of that batch lies "past" it and is still state.
                for records in batches.values():
                    for record in records:
                        if self._stopping.is_set():
                            return
                        await self._processor.process(record, handler)
                if pending:
                    await self._update_caught_up(consumer, pending)
                if pending and time.monotonic() >= deadline:
                    self._give_up_catching_up(pending)
                    pending.clear()
        finally:
            await consumer.stop()

    def _give_up_catching_up(self, pending: dict[TopicPartition, int]) -> None:
        reason = self.waiting_reason()
        CATCH_UP_GIVEN_UP.labels(service=self.service).inc()
        log.warning(
            "follower.caught_up_by_time_limit",
            extra={"fields": {"service": self.service, "after_s": self.catch_up_timeout, "reason": reason}},
        )
        self.caught_up.set()

    async def _update_caught_up(self, consumer: AIOKafkaConsumer, pending: dict[TopicPartition, int]) -> None:
        # The position, not the last offset seen: compaction and transaction
        # markers leave gaps the position steps over.
        for tp, end in list(pending.items()):
            position = await consumer.position(tp)
            if self._progress is not None:
                self._progress[tp] = (position, end)
            if position >= end:
                del pending[tp]
                if self._progress is not None:
                    self._progress.pop(tp, None)
        if not pending:
            self.caught_up.set()
            log.info(
                "follower.caught_up",
                extra={"fields": {"service": self.service, "topics": [t.name for t in self.topics]}},
            )


async def _all_partitions(consumer: AIOKafkaConsumer, topics: Sequence[Topic]) -> list[TopicPartition]:
    await consumer.topics()  # refreshes metadata
    partitions: list[TopicPartition] = []
    for topic in topics:
        ids = consumer.partitions_for_topic(topic.name)
        if not ids:
            raise broker_kind.TopicMissingError(f"topic {topic.name!r} does not exist on the broker (create it first)")
        partitions += [TopicPartition(topic.name, p) for p in sorted(ids)]
    return partitions


class EndWentBack(msgspec.Struct, frozen=True, kw_only=True):
    """A partition whose end offset shows the broker lost data."""

    topic: str
    partition: int
    end: int  # as the broker reports it now
    before: int  # the highest end it reported before


def ends_gone_back(
    ends: dict[TopicPartition, int], highest: dict[TopicPartition, int], acknowledged: dict[tuple[str, int], int]
) -> list[EndWentBack]:
    """Partitions whose data the broker lost: an end offset below one it reported before, or an
    empty partition where the producer had a record acknowledged.

    Not "an end below what the producer acknowledged": the embedded broker reports a partition's
    end as its last batch's first offset + 1, so after a batched send the end it reports lies below
    the last offset it acknowledged, with nothing lost. Both rules hold there and on Kafka. A loss
    that the partition has refilled past its old end by the next poll is the producer's own
    check: its first send after the loss is acknowledged at an offset it had seen before.
    """
    lost = []
    for tp, end in sorted(ends.items()):
        before = highest.get(tp, 0)
        wrote = acknowledged.get((tp.topic, tp.partition), 0) > 0
        if end < before or (end == 0 and wrote):
            lost.append(EndWentBack(topic=tp.topic, partition=tp.partition, end=end, before=before))
    return lost


async def watch_for_data_loss(
    bootstrap: str,
    topics: Sequence[Topic],
    *,
    producer: EventProducer,
    service: str,
    interval: float,
    security: KafkaSecurity | None = None,
) -> None:
    """Set `producer.recovered` once the broker shows it lost data (restarted empty), by the rules
    of `ends_gone_back`. Runs until cancelled, or until `recovered` is set. A Kafka broker never
    moves an end offset back, so this costs one offsets request per `interval` and never fires
    there; the embedded in-memory broker comes back from a restart with every end at 0.
    """
    recovered = producer.recovered
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, client_id=service, **client_options(security)
    )
    await consumer.start()
    try:
        highest: dict[TopicPartition, int] = {}
        while not recovered.is_set():
            ends = await consumer.end_offsets(await _all_partitions(consumer, topics))
            for lost in ends_gone_back(ends, highest, producer.acknowledged_ends()):
                log.warning(
                    "kafka.end_offset_went_back",
                    extra={
                        "fields": {
                            "topic": lost.topic,
                            "partition": lost.partition,
                            "end": lost.end,
                            "before": lost.before,
                            "service": service,
                        }
                    },  # fmt: skip
                )
                recovered.set()
            for tp, end in ends.items():
                highest[tp] = max(end, highest.get(tp, 0))
            if not recovered.is_set():
                await asyncio.sleep(interval)  # a poll: the broker announces nothing
    finally:
        await consumer.stop()


async def read_compacted(
    bootstrap: str,
    topic: Topic,
    *,
    service: str = "topoplace-reader",
    timeout: float = 30.0,
    security: KafkaSecurity | None = None,
) -> list[Received]:
    """Every message of `topic` from offset 0 up to its end at call time (in order within a partition).

    Bad messages are logged, counted and skipped. Apply `latest_by_key` for the
    compacted view.
    """
    received: list[Received] = []

    async def collect(message: Received) -> None:
        received.append(message)

    follower = TopicFollower(bootstrap, [topic], service=service, security=security)
    await asyncio.wait_for(follower._follow(collect, stop_at_end=True), timeout)
    return received


def latest_by_key(messages: Iterable[Received]) -> dict[str, Received]:
    """What a compacted topic means: the last message per key; a tombstone removes the key.

    Messages without a key have no place in a compacted topic and are ignored.
    """
    latest: dict[str, Received] = {}
    for message in messages:
        if message.key is None:
            continue
        if message.event is None:
            latest.pop(message.key, None)
        else:
            latest[message.key] = message
    return latest
