"""Backoff schedule and the retry loop, with an injected clock, sleep and randomness."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from services.binder.retry import (
    BackoffPolicy,
    RetriesExhausted,
    RetryBudget,
    backoff_ceiling,
    call_with_retry,
    full_jitter_delay,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_ceiling_doubles_up_to_the_cap() -> None:
    policy = BackoffPolicy(base_seconds=0.1, cap_seconds=1.0)
    ceilings = [backoff_ceiling(policy, n) for n in range(6)]
    assert ceilings == [pytest.approx(min(1.0, 0.1 * 2**n)) for n in range(6)]


def test_full_jitter_spans_zero_to_the_ceiling() -> None:
    policy = BackoffPolicy(base_seconds=0.2, cap_seconds=10.0)
    assert full_jitter_delay(policy, 3, lambda: 0.0) == 0.0
    assert full_jitter_delay(policy, 3, lambda: 0.5) == pytest.approx(0.5 * 0.2 * 8)
    assert full_jitter_delay(policy, 3, lambda: 0.999) < backoff_ceiling(policy, 3)


def test_budget_stops_at_max_attempts() -> None:
    clock = FakeClock()
    budget = RetryBudget(BackoffPolicy(max_attempts=3, deadline_seconds=1000), clock=clock, rand=lambda: 1.0)
    assert budget.next_delay() is not None
    assert budget.next_delay() is not None
    assert budget.next_delay() is None
    assert budget.attempts == 3


def test_budget_stops_before_the_deadline() -> None:
    clock = FakeClock()
    policy = BackoffPolicy(base_seconds=1.0, cap_seconds=4.0, max_attempts=100, deadline_seconds=5.0)
    budget = RetryBudget(policy, clock=clock, rand=lambda: 1.0)
    assert budget.next_delay() == pytest.approx(1.0)
    clock.now = 3.5
    # The next wait (2 s) would end past the 5 s deadline: give up now instead of sleeping.
    assert budget.next_delay() is None
    assert budget.attempts == 2


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"base_seconds": 0}, "base_seconds"),
        ({"cap_seconds": 0.01, "base_seconds": 0.1}, "cap_seconds"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"deadline_seconds": 0}, "deadline_seconds"),
    ],
)
def test_policy_rejects_bad_values(changes: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        BackoffPolicy(**changes)  # type: ignore[arg-type]


def failing(errors: list[BaseException], result: str = "ok"):  # type: ignore[no-untyped-def]
    calls = {"n": 0}

    async def call() -> str:
        calls["n"] += 1
        if errors:
            raise errors.pop(0)
        return result

    return call, calls


@pytest.mark.parametrize(
    "error",
    [
        ApiException(status=500, reason="Internal Server Error"),
        ApiException(status=429, reason="Too Many Requests"),
        ApiException(status=503, reason="Service Unavailable"),
        TimeoutError(),
        aiohttp.ClientConnectionError("refused"),
        aiohttp.ServerDisconnectedError(),
    ],
)
async def test_transient_errors_are_retried(error: BaseException) -> None:
    clock = FakeClock()
    budget = RetryBudget(BackoffPolicy(), clock=clock, rand=lambda: 0.5)
    call, calls = failing([error, error])
    retried: list[str] = []
    result = await call_with_retry("op", call, budget, sleep=clock.sleep, on_retry=lambda op, e: retried.append(op))
    assert result == "ok"
    assert calls["n"] == 3
    assert budget.attempts == 3
    assert retried == ["op", "op"]
    # full jitter at rand 0.5: half of each ceiling
    assert clock.slept == [pytest.approx(0.5 * backoff_ceiling(budget.policy, n)) for n in range(2)]


@pytest.mark.parametrize("status", [404, 409, 422, 400])
async def test_answers_are_not_retried(status: int) -> None:
    clock = FakeClock()
    budget = RetryBudget(BackoffPolicy(), clock=clock)
    call, calls = failing([ApiException(status=status)])
    with pytest.raises(ApiException) as raised:
        await call_with_retry("op", call, budget, sleep=clock.sleep)
    assert raised.value.status == status
    assert calls["n"] == 1 and clock.slept == []


async def test_gives_up_with_the_last_error_and_attempts() -> None:
    clock = FakeClock()
    budget = RetryBudget(BackoffPolicy(max_attempts=4), clock=clock, rand=lambda: 0.1)
    call, calls = failing([ApiException(status=503, reason="Service Unavailable") for _ in range(10)])
    with pytest.raises(RetriesExhausted) as raised:
        await call_with_retry("create binding", call, budget, sleep=clock.sleep)
    assert calls["n"] == 4
    assert raised.value.attempts == 4
    assert "503" in str(raised.value) and "create binding" in str(raised.value)


async def test_one_budget_spans_several_calls() -> None:
    clock = FakeClock()
    budget = RetryBudget(BackoffPolicy(max_attempts=3), clock=clock, rand=lambda: 0.1)
    first, _ = failing([ApiException(status=500)])
    await call_with_retry("read", first, budget, sleep=clock.sleep)
    second, _ = failing([ApiException(status=500), ApiException(status=500)])
    with pytest.raises(RetriesExhausted):
        await call_with_retry("bind", second, budget, sleep=clock.sleep)
    assert budget.attempts == 3
