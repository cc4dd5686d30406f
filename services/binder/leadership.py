"""One binder binds at a time: the replicas elect a leader through a coordination.k8s.io Lease.

The device ledger and the node-resource assumptions are the last check against a device, or a
node's CPUs, given twice, and they are one process's memory: two binders binding at once could
each pass its own check. So, as kube-scheduler's replicas do, the binders elect a leader with
kubernetes-asyncio's leader election: only the holder of the Lease `<scheduler>-binder` consumes
placements; a standby keeps its watches and ledger warm and waits. A leader that cannot renew
within the renew deadline stops binding before the Lease can expire for the others (15 s lease,
10 s renew deadline, 2 s retry: kube-scheduler's defaults), and its streams start over as a
standby (`LeadershipLost` is a `StartOver`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import NoReturn

import aiohttp
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.electionconfig import Config
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from topoplace.supervise import StartOver

log = logging.getLogger(__name__)

LEASE_SECONDS = 15  # whole seconds: the Lease stores an integer
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2
RELEASE_TIMEOUT_SECONDS = 2.0


class LeadershipLost(StartOver):
    """The Lease was lost, or could not be reached: stop binding and start over as a standby."""


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
        lease_seconds: int = LEASE_SECONDS,
        renew_deadline_seconds: int = RENEW_DEADLINE_SECONDS,
        retry_seconds: int = RETRY_SECONDS,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.leading = asyncio.Event()
        self._api = api
        self._lock = LeaseLock(name, namespace, identity, api)
        self._config = Config(
            self._lock,
            lease_seconds,
            renew_deadline_seconds,
            retry_seconds,
            onstarted_leading=self._lead,
            onstopped_leading=self._stopped,
        )
        self._leading_task: asyncio.Task[None] | None = None

    async def run(self) -> NoReturn:
        """Campaign, then hold the Lease; raises LeadershipLost once it is lost (never returns)."""
        where = f"Lease {self.namespace}/{self.name}"
        try:
            await LeaderElection(self._config).run()
        except asyncio.CancelledError:
            if self.leading.is_set():
                await self._release()  # stopping: hand the Lease over now, not after it expires
            raise
        except Exception as exc:  # the API unreachable mid-campaign: a fresh start campaigns again
            raise LeadershipLost(f"{where}: {type(exc).__name__}: {exc}") from exc
        finally:
            self.leading.clear()
            if self._leading_task is not None and not self._leading_task.done():
                self._leading_task.cancel()  # the library leaves it running when it was cancelled itself
        raise LeadershipLost(f"{where}: not renewed within {self._config.renew_deadline:g}s")

    async def _release(self) -> None:
        """Clear the holder, as kube-scheduler's release on cancel does; a failure leaves it to expire."""
        leases = CoordinationV1Api(self._api)
        try:
            await asyncio.wait_for(
                leases.patch_namespaced_lease(
                    self.name,
                    self.namespace,
                    {"spec": {"holderIdentity": None, "leaseDurationSeconds": 1}},
                    _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # the stub lacks it
                    _preload_content=False,
                ),
                RELEASE_TIMEOUT_SECONDS,
            )
        except (ApiException, OSError, TimeoutError, aiohttp.ClientError) as exc:
            log.warning("binder.lease_release_failed", extra={"fields": {"lease": self.name, "error": repr(exc)}})

    async def _lead(self) -> None:
        self._leading_task = asyncio.current_task()
        self.leading.set()
        log.info(
            "binder.leading", extra={"fields": {"lease": f"{self.namespace}/{self.name}", "identity": self.identity}}
        )
        await asyncio.Event().wait()  # until the library cancels it: the Lease was lost

    async def _stopped(self) -> None:
        self.leading.clear()
        log.warning("binder.leadership_lost", extra={"fields": {"lease": f"{self.namespace}/{self.name}"}})
