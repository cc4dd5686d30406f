"""One binder binds at a time: the Lease through kubernetes-asyncio's leader election, against the
test API server (coordination.k8s.io/v1 Leases)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection.leaderelection import LeaderElection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from services.binder.leadership import Leadership, LeadershipLost
from topoplace.config import LeaseTimings
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.supervise import is_transient_outage

# Short, so that losing a Lease takes about two seconds, not ten.
FAST = LeaseTimings(
    lease_seconds=3, renew_deadline_seconds=2, retry_seconds=1, watchdog_seconds=0.1, stop_grace_seconds=0.5
)


# A Lease name no real binder uses: nothing else that campaigns on a server can meet it.
LEASE = f"topoplace-binder-test-{uuid.uuid4().hex[:8]}"


def candidate(api: client.ApiClient, identity: str) -> Leadership:
    return Leadership(api, name=LEASE, namespace="default", identity=identity, timings=FAST)


async def stopped(running: asyncio.Task[object]) -> None:
    running.cancel()
    await asyncio.wait_for(asyncio.gather(running, return_exceptions=True), 10)


def holder(kube_api: KubeApiServer) -> str | None:
    lease = kube_api.store.get("leases.coordination.k8s.io", LEASE, "default")
    found: str | None = (lease.get("spec") or {}).get("holderIdentity")
    return found


async def test_one_candidate_leads_and_the_other_waits(kube_api: KubeApiServer, kube_client: client.ApiClient) -> None:
    first, second = candidate(kube_client, "binder-a"), candidate(kube_client, "binder-b")
    running = asyncio.create_task(first.run())
    try:
        await asyncio.wait_for(first.leading.wait(), 10)
        assert holder(kube_api) == "binder-a"
        # The other's campaign finds the Lease held and unexpired.
        assert not await LeaderElection(second._config).try_acquire_or_renew()
        assert holder(kube_api) == "binder-a"
    finally:
        await stopped(running)


async def test_a_leader_that_stops_hands_the_lease_over_at_once(
    kube_api: KubeApiServer, kube_client: client.ApiClient
) -> None:
    first, second = candidate(kube_client, "binder-a"), candidate(kube_client, "binder-b")
    running = asyncio.create_task(first.run())
    await asyncio.wait_for(first.leading.wait(), 10)
    await stopped(running)
    assert holder(kube_api) is None and not first.leading.is_set()
    # No waiting for the 3 s Lease to run out.
    assert await LeaderElection(second._config).try_acquire_or_renew()
    assert holder(kube_api) == "binder-b"


async def test_a_restarted_leader_with_the_same_identity_takes_its_lease_back(
    kube_api: KubeApiServer, kube_client: client.ApiClient
) -> None:
    first = candidate(kube_client, "binder-a")
    assert await LeaderElection(first._config).try_acquire_or_renew()  # then killed: nothing released
    again = candidate(kube_client, "binder-a")
    assert await LeaderElection(again._config).try_acquire_or_renew()


async def test_a_leader_whose_lease_was_taken_stops_and_starts_over(
    kube_api: KubeApiServer, kube_client: client.ApiClient
) -> None:
    first = candidate(kube_client, "binder-a")
    running = asyncio.create_task(first.run())
    await asyncio.wait_for(first.leading.wait(), 10)
    lease = kube_api.store.get("leases.coordination.k8s.io", LEASE, "default")
    lease["spec"]["holderIdentity"] = "binder-b"  # another binder took it (a partition healed, say)
    kube_api.store.replace("leases.coordination.k8s.io", LEASE, lease, namespace="default")
    with pytest.raises(LeadershipLost, match="not renewed") as lost:
        await asyncio.wait_for(running, 10)
    assert not first.leading.is_set()
    assert is_transient_outage(lost.value)  # the supervisor starts the binder's streams over


async def test_a_leader_whose_renewals_hang_stops_before_its_lease_can_run_out(
    kube_api: KubeApiServer, kube_client: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = candidate(kube_client, "binder-a")
    running = asyncio.create_task(first.run())
    await asyncio.wait_for(first.leading.wait(), 10)

    async def hang(*args: object, **kwargs: object) -> bool:
        await asyncio.Event().wait()  # a request the server never answers
        return True

    monkeypatch.setattr(LeaseLock, "update", hang)
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(running, 10)
    stopped_at = time.monotonic()
    written = first._lock.written_at
    assert written is not None and not first.leading.is_set()
    # A standby could take the Lease only once it had not changed for lease_seconds.
    assert stopped_at < written + FAST.lease_seconds
