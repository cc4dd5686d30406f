"""The topic follower: read every partition of topics from offset 0, outside any group, to rebuild state.

Also `read_compacted` (a topic up to its end, once) and `latest_by_key` (what a compacted topic means).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition
from prometheus_client import Counter

from schemas.topics import Topic
from topoplace.kafka.fetch_loop import FETCH_MAX_WAIT_MS, StoppableLoop, all_partitions
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Handler, Received, RecordProcessor
from topoplace.kafka.security import KafkaSecurity, client_options

log = logging.getLogger(__name__)

# A follower that has not reached the end offsets it read at start within this time declares
# itself caught up anyway: a restarted broker once reported an end that no fetch reached.
CATCH_UP_TIMEOUT_S = 30.0

CATCH_UP_GIVEN_UP = Counter(
    "topoplace_follower_catch_up_given_up",
    "Followers that declared themselves caught up at their time limit, short of the end offsets",
    ["service"],
)


class TopicFollower(StoppableLoop):
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
            partitions = await all_partitions(consumer, self.topics)
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
