"""The supervisor: transient failures restart the body with backoff, others end the service, stop ends all."""

from __future__ import annotations

import asyncio
import random

import aiohttp
import pytest
from aiokafka.errors import KafkaConnectionError, UnknownError
from infra_helpers import metric
from kubernetes_asyncio.client.exceptions import ApiException

from topoplace.config import ConfigError, Settings
from topoplace.kafka.bootstrap import kafka_bootstrap
from topoplace.kafka.broker_kind import TopicMissingError
from topoplace.supervise import (
    Backoff,
    BrokerRecovered,
    StartOver,
    Supervisor,
    failed_dependency,
    is_transient_kafka_error,
    is_transient_outage,
    raise_when_recovered,
)

FAST = Backoff(base=0.001, cap=0.002)
WAIT = 15.0


async def test_transient_failures_restart_the_body_until_it_returns() -> None:
    failures: list[Exception] = [KafkaConnectionError("refused"), UnknownError(), TopicMissingError("pods.pending")]
    runs = 0

    async def body() -> None:
        nonlocal runs
        runs += 1
        if failures:
            raise failures.pop(0)

    supervisor = Supervisor("test-supervise-a", stop=asyncio.Event(), backoff=FAST)
    await asyncio.wait_for(supervisor.run("body", body), WAIT)
    assert runs == 4
    assert supervisor.restarts == 3
    assert supervisor.problem is not None and supervisor.problem.startswith("Kafka: body: TopicMissingError")
    assert metric("topoplace_loop_restarts_total", service="test-supervise-a", loop="body") == 3


async def test_a_bug_is_not_retried() -> None:
    runs = 0

    async def body() -> None:
        nonlocal runs
        runs += 1
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        await Supervisor("test-supervise-b", stop=asyncio.Event(), backoff=FAST).run("body", body)
    assert runs == 1


async def test_stop_cancels_a_running_body_and_ends_a_backoff() -> None:
    stop = asyncio.Event()
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def body() -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # runs until cancelled
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    supervisor = Supervisor("test-supervise-c", stop=stop, backoff=FAST)
    run = asyncio.create_task(supervisor.run("body", body))
    await asyncio.wait_for(started.wait(), WAIT)
    stop.set()
    await asyncio.wait_for(run, WAIT)
    assert cancelled == [True]

    later = asyncio.Event()

    async def failing() -> None:
        later.set()  # stop arrives while the supervisor would back off for an hour
        raise KafkaConnectionError("refused")

    again = Supervisor("test-supervise-c", stop=later, backoff=Backoff(base=3600, cap=3600))
    await asyncio.wait_for(again.run("body", failing), WAIT)
    assert again.restarts == 1


def test_task_groups_are_transient_when_every_failure_is() -> None:
    assert is_transient_outage(ExceptionGroup("loops", [UnknownError(), BrokerRecovered("back")]))
    assert not is_transient_outage(ExceptionGroup("loops", [UnknownError(), ValueError("bug")]))
    assert not is_transient_outage(KeyError("bug"))  # a LookupError, but not a missing topic


def test_transient_kafka_errors() -> None:
    assert is_transient_kafka_error(UnknownError())
    assert is_transient_kafka_error(KafkaConnectionError())
    from aiokafka.errors import MessageSizeTooLargeError, NotLeaderForPartitionError

    assert is_transient_kafka_error(NotLeaderForPartitionError())
    assert not is_transient_kafka_error(MessageSizeTooLargeError())


@pytest.mark.parametrize("attempt", range(12))
def test_backoff_grows_to_its_cap_with_jitter(attempt: int) -> None:
    backoff = Backoff(base=0.1, cap=2.0)
    ceiling = min(2.0, 0.1 * 2**attempt)
    delays = {backoff.delay(attempt, random.Random(seed)) for seed in range(20)}
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(delays) > 1  # jittered


async def test_recovery_raises_once_set() -> None:
    recovered = asyncio.Event()
    recovered.set()
    with pytest.raises(BrokerRecovered):
        await raise_when_recovered(recovered)


async def test_no_kafka_and_no_embedded_broker_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="KAFKA_BOOTSTRAP") as caught:
        async with kafka_bootstrap(Settings()):
            pass
    assert "TOPOPLACE_EMBEDDED_BROKER" in str(caught.value)


async def test_the_embedded_broker_runs_when_asked_for() -> None:
    async with kafka_bootstrap(Settings(embedded_broker=True)) as bootstrap:
        assert bootstrap.startswith("127.0.0.1:")


def _lease_lost_from(cause: BaseException) -> StartOver:
    try:
        raise StartOver("Lease default/topoplace-binder: renew failed") from cause
    except StartOver as exc:
        return exc


@pytest.mark.parametrize(
    ("failure", "dependency"),
    [
        (KafkaConnectionError("refused"), "Kafka"),
        (TopicMissingError("pods.pending"), "Kafka"),
        (BrokerRecovered("back"), "Kafka"),
        (aiohttp.ClientConnectionError("api refused"), "the API server"),
        (ApiException(status=503), "the API server"),
        (_lease_lost_from(aiohttp.ClientConnectionError("api refused")), "the API server"),
        (StartOver("not renewed within 10s"), None),
        (ConnectionRefusedError("either"), None),
        (ExceptionGroup("loops", [KafkaConnectionError("a"), UnknownError()]), "Kafka"),
        (ExceptionGroup("loops", [KafkaConnectionError("a"), aiohttp.ClientConnectionError("b")]), None),
    ],
)
def test_a_failure_names_the_dependency_that_is_away(failure: BaseException, dependency: str | None) -> None:
    assert failed_dependency(failure) == dependency


async def test_the_supervisors_problem_names_the_api_server_not_kafka() -> None:
    stop = asyncio.Event()
    supervisor = Supervisor("test", stop=stop, backoff=FAST)
    problems: list[str | None] = []

    async def body() -> None:
        problems.append(supervisor.problem)
        if len(problems) == 1:
            raise aiohttp.ClientOSError("Cannot connect to host api:6443")  # an OSError: an outage

    await asyncio.wait_for(supervisor.run("streams", body), WAIT)
    assert problems == [None, "the API server: streams: ClientOSError: Cannot connect to host api:6443"]
