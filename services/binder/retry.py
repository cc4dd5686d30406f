"""Retrying API calls: exponential backoff with full jitter, bounded in attempts and time.

One `RetryBudget` covers every call made for one placement, so a placement
never takes longer than the policy's deadline however many calls it needs,
and the attempts it reports count every retry. Clock, sleep and randomness
are injected so the schedule is tested without waiting.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio.client.exceptions import ApiException

from services.binder.outcome import ApiErrorKind, classify_status

T = TypeVar("T")


class BackoffPolicy(msgspec.Struct, frozen=True, kw_only=True):
    base_seconds: float = 0.1  # the first retry waits up to this
    cap_seconds: float = 5.0  # no single wait is longer
    max_attempts: int = 6  # calls in all, first try included, per placement
    deadline_seconds: float = 30.0  # no retry starts that would end after this, per placement
    request_timeout_seconds: float = 10.0  # one HTTP call

    def __post_init__(self) -> None:
        if self.base_seconds <= 0:
            raise ValueError(f"base_seconds: {self.base_seconds} must be positive")
        if self.cap_seconds < self.base_seconds:
            raise ValueError(f"cap_seconds: {self.cap_seconds} is below base_seconds {self.base_seconds}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts: {self.max_attempts} must be at least 1")
        if self.deadline_seconds <= 0:
            raise ValueError(f"deadline_seconds: {self.deadline_seconds} must be positive")


DEFAULT_POLICY = BackoffPolicy()


def backoff_ceiling(policy: BackoffPolicy, retry: int) -> float:
    """The longest wait before retry number `retry` (0 = the first retry)."""
    return min(policy.cap_seconds, policy.base_seconds * float(2**retry))


def full_jitter_delay(policy: BackoffPolicy, retry: int, rand: Callable[[], float]) -> float:
    # Full jitter (a uniform wait in [0, ceiling)) spreads the retries of many
    # binders apart instead of letting them hit a recovering server together.
    return rand() * backoff_ceiling(policy, retry)


class RetryBudget:
    """Attempts and time left for the calls of one placement."""

    def __init__(
        self,
        policy: BackoffPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._rand = rand
        self._started = clock()
        self.retries = 0

    @property
    def attempts(self) -> int:
        """What a binding reports: 1 when nothing had to be retried."""
        return 1 + self.retries

    def elapsed(self) -> float:
        return self._clock() - self._started

    def start_now(self) -> None:
        """The deadline counts from now: time spent queued behind other placements is not this one's."""
        self._started = self._clock()

    def next_delay(self) -> float | None:
        """The wait before one more retry, or None when the budget is spent."""
        if self.attempts >= self.policy.max_attempts:
            return None
        delay = full_jitter_delay(self.policy, self.retries, self._rand)
        if self.elapsed() + delay >= self.policy.deadline_seconds:
            return None
        self.retries += 1
        return delay


class RetriesExhausted(Exception):
    def __init__(self, operation: str, attempts: int, elapsed: float, last_error: str) -> None:
        super().__init__(f"{operation} gave up after {attempts} attempts in {elapsed:.1f}s: {last_error}")
        self.operation = operation
        self.attempts = attempts
        self.last_error = last_error


def transient_error(exc: BaseException) -> str | None:
    """Describes an error worth retrying, or None for one that is not."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        if classify_status(status) is ApiErrorKind.TRANSIENT:
            return f"HTTP {status} {exc.reason or ''}".strip()
        return None
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientError):
        return f"connection error: {exc.__class__.__name__}: {exc}"
    return None


async def call_with_retry(
    operation: str,
    call: Callable[[], Awaitable[T]],
    budget: RetryBudget,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_retry: Callable[[str, str], None] | None = None,
) -> T:
    """Run `call`; retry transient failures while the budget lasts.

    Non-transient errors (404, 409, 422...) propagate at once: they are answers,
    not failures. `on_retry(operation, error)` is told of each retry (metrics, logs).
    """
    while True:
        try:
            return await call()
        except (TimeoutError, ApiException, aiohttp.ClientError) as exc:
            error = transient_error(exc)
            if error is None:
                raise
            delay = budget.next_delay()
            if delay is None:
                raise RetriesExhausted(operation, budget.attempts, budget.elapsed(), error) from exc
            if on_retry is not None:
                on_retry(operation, error)
            await sleep(delay)
