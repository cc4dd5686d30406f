"""The group consumer: read topics as a member of a consumer group, at least once.

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
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError

from schemas.topics import Topic
from topoplace.kafka import broker_kind
from topoplace.kafka.fetch_loop import FETCH_MAX_WAIT_MS, StoppableLoop
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Handler, RecordProcessor
from topoplace.kafka.security import KafkaSecurity, client_options

log = logging.getLogger(__name__)


class EventConsumer(StoppableLoop):
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
