"""One binder binds at a time: the replicas elect a leader through a coordination.k8s.io Lease.

The device ledger and the node-resource assumptions are the last check against a device, or a
node's CPUs, given twice, and they are one process's memory: two binders binding at once could
each pass its own check. So, as kube-scheduler's replicas do, the binders elect a leader with
kubernetes-asyncio's leader election: only the holder of the Lease `<scheduler>-binder` consumes
placements; a standby keeps its watches and ledger warm and waits. A leader that cannot renew
within the renew deadline stops binding before the Lease can expire for the others (15 s lease,
10 s renew deadline, 2 s retry: kube-scheduler's defaults), and its streams start over as a
standby (`LeadershipLost` is a `StartOver`).

The library leaves each API call unbounded: a renewal that hangs (a dropped connection the
client waits minutes on) would keep a leader from noticing that it no longer renews while a
standby, seeing the Lease unchanged for 15 s, takes over, and both would bind. So every Lease
call here ends within CALL_TIMEOUT_SECONDS, and a watchdog ends the leadership as soon as the
Lease was last written by this binder more than the renew deadline ago, whatever the library
is doing.

Losing the Lease (the watchdog, or the library's on-stopped-leading) sets `lost` at once;
`cancel_binds_on_loss` then cancels the placements' consumer, so the binds in flight end with
their offsets uncommitted (the next leader binds them again), and exits the process, as
kube-scheduler does on lost leadership, if they have not ended within the stop grace. The
deadline counts from when the last renewal *started*, not from its reply: a slow reply must not
stretch leadership past what the standbys assume. The timings are `LeaseTimings`
(topoplace/config.py), which refuses any whose renew deadline + watchdog + stop grace is not
shorter than the lease.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

import aiohttp
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from topoplace.config import LeaseTimings
from topoplace.supervise import StartOver

log = logging.getLogger(__name__)

RELEASE_TIMEOUT_SECONDS = 2.0
CALL_TIMEOUT_SECONDS = 2.0  # one read or write of the Lease
DEFAULT_TIMINGS = LeaseTimings()  # kube-scheduler's: 15 s lease, 10 s renew deadline, 2 s retry
CANCEL_RETRY_SECONDS = 0.5  # how long a cancelled campaign may take to end before it is cancelled again
UNREACHABLE = json.dumps({"code": 503}).encode()  # what the library reads off a failed read's body


class LeadershipLost(StartOver):
    """The Lease was lost, or could not be reached: stop binding and start over as a standby."""


class BoundedLeaseLock(LeaseLock):
    """kubernetes-asyncio's LeaseLock with every call bounded in time, an unreachable API server
    answered as the library answers a refusal, and the time of its last successful write kept."""

    def __init__(
        self,
        name: str,
        namespace: str,
        identity: str,
        api: ApiClient,
        *,
        call_timeout: float = CALL_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name, namespace, identity, api)
        self._call_timeout = call_timeout
        self._clock = clock
        self.written_at: float | None = None  # when our last create or renewal that the server accepted started

    async def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        try:
            async with asyncio.timeout(self._call_timeout):
                return await super().get(name, namespace)
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:
            refused = ApiException(status=503, reason=f"{type(exc).__name__}: {exc}")
            refused.body = UNREACHABLE
            return False, refused

    async def create(self, name: str, namespace: str, election_record: LeaderElectionRecord) -> bool:
        started = self._clock()
        return self._written(started, await self._bounded(super().create(name, namespace, election_record)))

    async def update(self, name: str, namespace: str, updated_record: LeaderElectionRecord) -> bool:
        started = self._clock()
        return self._written(started, await self._bounded(super().update(name, namespace, updated_record)))

    async def _bounded(self, call: Coroutine[Any, Any, bool]) -> bool:
        try:
            async with asyncio.timeout(self._call_timeout):
                return await call
        except (TimeoutError, OSError, aiohttp.ClientError) as exc:
            log.warning("binder.lease_call_failed", extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})
            return False

    def _written(self, started: float, ok: bool) -> bool:
        # The start, not the reply: the server may have applied the write at any moment in between,
        # and a standby's lease clock starts when it sees it.
        if ok:
            self.written_at = started
        return ok


async def _ended(*tasks: asyncio.Future[Any]) -> None:
    """Cancel the tasks and wait until they have ended. Cancelled again while one runs on: a
    cancellation can be lost (Python 3.11's asyncio.wait_for returns a result that came with it, so
    code that uses it may swallow one), and a campaign that ignored it would run on forever."""
    while pending := [t for t in tasks if not t.done()]:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=CANCEL_RETRY_SECONDS)


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Leadership:
    def __init__(
        self,
        api: ApiClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        timings: LeaseTimings = DEFAULT_TIMINGS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.timings = timings
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()  # set the moment leadership is lost: stop binding now
        self._api = api
        self._clock = clock
        self._lock = BoundedLeaseLock(name, namespace, identity, api, clock=clock)
        self._renew_deadline = timings.renew_deadline_seconds
        self._expired = asyncio.Event()  # set by the watchdog: not renewed within the deadline
        self._config = Config(
            self._lock,
            timings.lease_seconds,
            timings.renew_deadline_seconds,
            timings.retry_seconds,
            onstarted_leading=self._lead,
            onstopped_leading=self._stopped,
        )
        self._leading_task: asyncio.Task[None] | None = None

    async def run(self) -> NoReturn:
        """Campaign, then hold the Lease; raises LeadershipLost once it is lost (never returns)."""
        where = f"Lease {self.namespace}/{self.name}"
        self._expired.clear()
        self.lost.clear()
        election = asyncio.ensure_future(LeaderElection(self._config).run())
        expired = asyncio.ensure_future(self._expired.wait())
        try:
            await asyncio.wait({election, expired}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if self.leading.is_set():
                self.leading.clear()
                await self._release()  # stopping: hand the Lease over now, not after it expires
            raise
        finally:
            self.leading.clear()
            if self._leading_task is not None:
                self._leading_task.cancel()  # the library leaves it running when it is cancelled itself
            await _ended(election, expired)
        self.lost.set()
        if election.done() and not election.cancelled() and (error := election.exception()) is not None:
            raise LeadershipLost(f"{where}: {type(error).__name__}: {error}") from error
        raise LeadershipLost(f"{where}: not renewed within {self._renew_deadline}s")

    async def _release(self) -> None:
        """Clear the holder, as kube-scheduler's release on cancel does; a failure leaves it to expire."""
        leases = CoordinationV1Api(self._api)
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT_SECONDS):
                await leases.patch_namespaced_lease(
                    self.name,
                    self.namespace,
                    {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1}},
                    _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # the stub lacks it
                    _preload_content=False,
                )
        except (ApiException, OSError, TimeoutError, aiohttp.ClientError) as exc:
            log.warning("binder.lease_release_failed", extra={"fields": {"lease": self.name, "error": repr(exc)}})

    async def _lead(self) -> None:
        self._leading_task = asyncio.current_task()
        self.leading.set()
        log.info(
            "binder.leading", extra={"fields": {"lease": f"{self.namespace}/{self.name}", "identity": self.identity}}
        )
        # The watchdog: until the library cancels this task (the Lease lost), or our last write of
        # the Lease is older than the renew deadline.
        while True:
            await asyncio.sleep(self.timings.watchdog_seconds)  # a periodic check, not synchronisation
            written = self._lock.written_at
            if written is None or self._clock() - written > self._renew_deadline:
                self.lost.set()
                self.leading.clear()
                self._expired.set()
                return

    async def _stopped(self) -> None:
        self.lost.set()
        self.leading.clear()
        log.warning("binder.leadership_lost", extra={"fields": {"lease": f"{self.namespace}/{self.name}"}})


def exit_now(code: int) -> NoReturn:
    """End the process at once (no cleanup that could still bind), after the logs are out."""
    logging.shutdown()
    os._exit(code)


async def cancel_binds_on_loss(
    lost: asyncio.Event,
    binds: asyncio.Task[Any],
    *,
    grace: float,
    exit_process: Callable[[int], object] = exit_now,
) -> None:
    """When `lost` is set, cancel `binds` (the placements' consumer) at once; its offsets stay
    uncommitted, so the next leader binds those placements again. Binds that have not ended
    within `grace` (a handler that swallowed the cancellation) end with the process."""
    await lost.wait()
    if binds.done():
        return
    binds.cancel()
    done, _ = await asyncio.wait({binds}, timeout=grace)
    if not done:
        log.critical("binder.binds_outlived_leadership", extra={"fields": {"grace_seconds": grace}})
        exit_process(1)
