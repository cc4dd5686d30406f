"""Keep a service's Kafka loops alive through broker outages; cancellation handled in one place.

Every long-running service (cluster watcher, node agent and fleet, placer,
binder) runs its Kafka work as one body under a `Supervisor`: when the body
fails with a transient error (the broker away, refusing, restarted empty), the
supervisor logs it, counts it, waits with backoff and jitter, and runs the body
again from the start: connect, create the topics, rebuild state from them.
Any other error is a bug and ends the service. `stop` ends everything, at any
point, and `run_until` is the only place that cancels the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn

import aiohttp
import msgspec
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    NotLeaderForPartitionError,
    RequestTimedOutError,
    UnknownError,
)
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Counter

from topoplace.kafka.admin import BrokerError
from topoplace.kafka.broker_kind import TopicMissingError

log = logging.getLogger(__name__)

LOOP_RESTARTS = Counter(
    "topoplace_loop_restarts",
    "Kafka loops of a service restarted after a transient failure (broker away or restarted)",
    ["service", "loop"],
)

# Errors aiokafka raises for a broker that is away, restarting or moving leaders. UnknownError
# is what a restarted embedded broker answered a produce with; KafkaTimeoutError is a
# request that got no answer in time.
TRANSIENT_KAFKA_ERRORS: tuple[type[KafkaError], ...] = (
    UnknownError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NodeNotReadyError,
    RequestTimedOutError,
    NotLeaderForPartitionError,
)


def is_transient_kafka_error(exc: BaseException) -> bool:
    """Whether sending again later may succeed (aiokafka's own `retriable` flag, plus the list above)."""
    return isinstance(exc, TRANSIENT_KAFKA_ERRORS) or (isinstance(exc, KafkaError) and exc.retriable)


def is_transient_outage(exc: BaseException) -> bool:
    """Whether a service loop that failed with `exc` should reconnect and resume, rather than end."""
    if isinstance(exc, BaseExceptionGroup):  # a TaskGroup of loops: transient when every failure is
        return all(is_transient_outage(e) for e in exc.exceptions)
    if isinstance(exc, KafkaError):
        # A loop that failed for any broker reason starts over from a fresh connection.
        return True
    # Refused or reset connections, timeouts (TimeoutError is an OSError); a topic missing
    # from a broker that came back empty (the restarted body creates it again).
    return isinstance(exc, OSError | BrokerError | TopicMissingError | BrokerRecovered | StartOver)


def failed_dependency(exc: BaseException) -> str | None:
    """What a transient failure says is away: Kafka, the API server, or None when it does not say.

    Kafka is reached through aiokafka, the API server through aiohttp: an aiohttp client error is
    the API server's. A plain OSError may be either's. A StartOver is judged by its cause."""
    if isinstance(exc, BaseExceptionGroup):
        named = {failed_dependency(e) for e in exc.exceptions}
        return named.pop() if len(named) == 1 else None
    if isinstance(exc, KafkaError | BrokerError | TopicMissingError | BrokerRecovered):
        return "Kafka"
    if isinstance(exc, aiohttp.ClientError | ApiException):
        return "the API server"
    if isinstance(exc, StartOver) and exc.__cause__ is not None:
        return failed_dependency(exc.__cause__)
    return None


class StartOver(Exception):  # noqa: N818 - an event, not a failure: the body starts over on purpose
    """The body lost something it cannot go on without (a leader's Lease, say) and starts over."""


class BrokerRecovered(Exception):  # noqa: N818 - an event, not a failure: the body starts over on purpose
    """Sends succeed again after transient failures: the broker may have come back without its data."""


async def raise_when_recovered(recovered: asyncio.Event) -> NoReturn:
    """Raise BrokerRecovered once `recovered` is set: run it beside a body that must republish then."""
    await recovered.wait()
    raise BrokerRecovered("a send went through after transient failures; the broker may have lost its data")


class Backoff(msgspec.Struct, frozen=True, kw_only=True):
    """Exponential backoff with full jitter: attempt n waits uniformly in [0, min(cap, base * 2**n)]."""

    base: float = 0.2
    cap: float = 10.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = min(self.cap, self.base * 2 ** min(attempt, 32))
        return (rng or random).uniform(ceiling / 2, ceiling)  # half fixed, half jitter: never a burst at 0


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds` unless `stop` is set first; whether it was."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return stop.is_set()


async def run_until(work: Awaitable[None], stop: asyncio.Event) -> None:
    """Run `work` until it ends or `stop` is set (then cancel it); its own failure propagates."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if not task.cancelled() and (error := task.exception()) is not None:
        raise error


class Supervisor:
    """Runs a service's Kafka body again after each transient failure, until `stop` is set."""

    # A body that ran this long before failing starts the backoff over: it was an outage, not a loop.
    HEALTHY_RUN_S = 60.0

    def __init__(self, service: str, *, stop: asyncio.Event, backoff: Backoff | None = None) -> None:
        self.service = service
        self.stop = stop
        self.backoff = backoff or Backoff()
        # The last transient failure, led by what is away when it says ("Kafka: ..."), until the body runs again.
        self.problem: str | None = None
        self.restarts = 0

    async def run(self, loop: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run `body()` until it returns or `stop` is set; restart it after transient failures."""
        attempt = 0
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                await run_until(body(), self.stop)
                return
            except Exception as exc:
                if not is_transient_outage(exc):
                    raise
                if time.monotonic() - started >= self.HEALTHY_RUN_S:
                    attempt = 0
                delay = self.backoff.delay(attempt)
                attempt += 1
                self.restarts += 1
                dependency = failed_dependency(exc)
                self.problem = (f"{dependency}: " if dependency else "") + f"{loop}: {type(exc).__name__}: {exc}"
                LOOP_RESTARTS.labels(service=self.service, loop=loop).inc()
                log.warning(
                    "service.kafka_loop_restart",
                    extra={
                        "fields": {
                            "service": self.service,
                            "loop": loop,
                            "error": self.problem,
                            "retry_in_s": round(delay, 3),
                        }
                    },
                )
            if await wait_or_stop(self.stop, delay):
                return

    def running(self) -> None:
        """The body reached its working state again (connected): clear the last problem."""
        self.problem = None
