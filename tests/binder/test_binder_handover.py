"""Issue 15, finding 10: a binder that loses the Lease stops binding before another can take it.

The timings are checked where they are parsed; a renewal counts from when it started; and a bind in
flight when the Lease is lost is cancelled at once, its placement left uncommitted for the next
leader (the real consumer on the embedded broker, the real Lease on the test API server, an
injected clock for the watchdog)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from binder_support import RecordingProducer
from hypothesis import given
from hypothesis import strategies as st
from kubernetes_asyncio import client
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from schemas import topics
from schemas.events import DeviceAssignment, PlacementEvent, PlacementOutcome
from services.binder.apply import BindResult
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.leadership import BoundedLeaseLock, Leadership, LeadershipLost, cancel_binds_on_loss
from services.binder.ledger import DeviceLedger
from services.binder.outcome import PodView
from topoplace.config import (
    LEADER_LEASE,
    LEADER_RENEW_DEADLINE,
    LEADER_RETRY,
    LEADER_STOP_GRACE,
    LEADER_WATCHDOG,
    ConfigError,
    LeaseTimingError,
    LeaseTimings,
    Settings,
)
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.consumer import EventConsumer
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received

WAIT = 30.0  # seconds; a bound on a hung test, never reached when things work
FAST = LeaseTimings(
    lease_seconds=3, renew_deadline_seconds=2, retry_seconds=1, watchdog_seconds=0.01, stop_grace_seconds=0.5
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the timings -------------------------------------------------------------------------------


def test_the_default_timings_stop_a_lost_leader_before_its_lease_runs_out() -> None:
    for timings in (LeaseTimings(), Settings.from_env({}).lease_timings):
        stops_by = timings.renew_deadline_seconds + timings.watchdog_seconds + timings.stop_grace_seconds
        assert stops_by < timings.lease_seconds
        assert (timings.lease_seconds, timings.renew_deadline_seconds, timings.retry_seconds) == (15, 10, 2)


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({LEADER_LEASE: "12"}, (LEADER_LEASE, LEADER_RENEW_DEADLINE, LEADER_WATCHDOG, LEADER_STOP_GRACE)),
        ({LEADER_STOP_GRACE: "10"}, (LEADER_LEASE, LEADER_RENEW_DEADLINE, LEADER_WATCHDOG, LEADER_STOP_GRACE)),
        ({LEADER_RENEW_DEADLINE: "15"}, (LEADER_LEASE, LEADER_RENEW_DEADLINE, LEADER_WATCHDOG, LEADER_STOP_GRACE)),
        ({LEADER_RETRY: "9"}, (LEADER_RENEW_DEADLINE, LEADER_RETRY)),
    ],
)
def test_timings_that_let_two_binders_bind_at_once_are_refused_naming_the_variables(
    environ: dict[str, str], named: tuple[str, ...]
) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(environ)
    assert refused.value.variable == ", ".join(named)


def test_longer_leases_may_have_longer_graces() -> None:
    timings = Settings.from_env({LEADER_LEASE: "30", LEADER_RENEW_DEADLINE: "20", LEADER_STOP_GRACE: "5"}).lease_timings
    assert (timings.lease_seconds, timings.renew_deadline_seconds, timings.stop_grace_seconds) == (30, 20, 5.0)


@given(st.integers(1, 60), st.integers(1, 60), st.integers(1, 30), st.floats(0.01, 5.0), st.floats(0.01, 20.0))
def test_every_accepted_combination_stops_binding_within_the_lease(
    lease: int, renew: int, retry: int, watchdog: float, grace: float
) -> None:
    try:
        timings = LeaseTimings(
            lease_seconds=lease,
            renew_deadline_seconds=renew,
            retry_seconds=retry,
            watchdog_seconds=watchdog,
            stop_grace_seconds=grace,
        )
    except LeaseTimingError:
        return
    assert timings.renew_deadline_seconds + timings.watchdog_seconds + timings.stop_grace_seconds < lease


# --- the renewal's time ------------------------------------------------------------------------


async def test_a_renewal_counts_from_when_it_started_not_from_its_slow_reply(
    kube_client: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()

    async def slow_update(self: LeaseLock, name: str, namespace: str, record: object) -> bool:
        clock.now += 7.0  # the reply comes 7 s after the request went out
        return True

    monkeypatch.setattr(LeaseLock, "update", slow_update)
    lock = BoundedLeaseLock("lease", "default", "binder-a", kube_client, clock=clock)
    assert await lock.update("lease", "default", LeaderElectionRecord("binder-a", "15", "t", "t"))
    assert lock.written_at == 1000.0


# --- a bind in flight when the Lease is lost ---------------------------------------------------


class BlockedBinder:
    """A bind whose request is still out when the Lease is lost."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def bind(self, placement: PlacementEvent, known: PodView | None = None) -> BindResult:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")

    async def current_pod(self, namespace: str, name: str) -> PodView | None:
        return None


class NoReports:
    def scheduled(self, placement: PlacementEvent) -> None: ...

    def failed_scheduling(self, placement: PlacementEvent, message: str) -> None: ...

    def unschedulable(self, placement: PlacementEvent, message: str) -> None: ...


def a_placement() -> PlacementEvent:
    uid = str(uuid.uuid4())
    return PlacementEvent(
        decision_id=f"d-{uid[:8]}",
        uid=uid,
        namespace="default",
        name=f"pod-{uid[:8]}",
        pod_resource_version="1",
        outcome=PlacementOutcome.PLACED,
        node="gpu-node-1",
        devices=(DeviceAssignment(index=0),),
    )


async def test_a_bind_in_flight_when_the_lease_is_lost_is_cancelled_and_bound_by_the_next_leader(
    kube_api: KubeApiServer, kube_client: client.ApiClient, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = topics.Topic(
        name=f"test.{uuid.uuid4().hex[:12]}", event=PlacementEvent, key="pod uid", compacted=False, partitions=1
    )
    await ensure_topics(kafka_bootstrap, [topic])
    group = f"test-handover-{uuid.uuid4().hex[:8]}"
    clock = Clock()
    leadership = Leadership(
        kube_client, name=f"handover-{uuid.uuid4().hex[:8]}", namespace="default", identity="binder-a",
        timings=FAST, clock=clock,
    )  # fmt: skip
    leading = asyncio.create_task(leadership.run())
    ledger, binder, outcomes = DeviceLedger(), BlockedBinder(), RecordingProducer()
    handler = PlacementHandler(
        steps=BindingSteps(ledger=ledger, binder=binder, reporter=NoReports()), producer=outcomes
    )
    placement = a_placement()
    exits: list[int] = []
    async with EventProducer(kafka_bootstrap, service="test-handover") as producer:
        await asyncio.wait_for(leadership.leading.wait(), WAIT)
        await producer.send(topic, placement.uid, placement)
        first = EventConsumer(kafka_bootstrap, [topic], group_id=group, service="test-handover", producer=producer)
        binds = asyncio.create_task(first.run(handler))
        guard = asyncio.create_task(cancel_binds_on_loss(leadership.lost, binds, grace=5.0, exit_process=exits.append))
        await asyncio.wait_for(binder.started.wait(), WAIT)
        assert ledger.pod_count() == 1  # the bind holds its device while the request is out

        async def hang(*args: Any, **kwargs: Any) -> bool:
            await asyncio.Event().wait()  # renewals that never come back
            return True

        monkeypatch.setattr(LeaseLock, "update", hang)
        clock.now += FAST.renew_deadline_seconds + 1  # past the renew deadline, by the leader's clock
        await asyncio.wait_for(guard, WAIT)
        assert binds.cancelled() and binder.cancelled and exits == []
        assert ledger.pod_count() == 0 and outcomes.sent == []  # no hold kept, no outcome reported
        with pytest.raises(LeadershipLost):
            await asyncio.wait_for(leading, WAIT)

        # The next leader, in the same group, is given the placement again: its offset was not committed.
        again: asyncio.Queue[Received] = asyncio.Queue()
        second = EventConsumer(kafka_bootstrap, [topic], group_id=group, service="test-handover", producer=producer)
        task = asyncio.create_task(second.run(again.put))
        try:
            redelivered = await asyncio.wait_for(again.get(), WAIT)
        finally:
            await second.stop()
            await asyncio.gather(task, return_exceptions=True)
    assert redelivered.event == placement and redelivered.offset == 0


async def test_binds_that_outlive_the_grace_end_the_process() -> None:
    release, started = asyncio.Event(), asyncio.Event()

    async def deaf_bind() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # swallows the cancellation: it would go on binding

    lost = asyncio.Event()
    binds = asyncio.create_task(deaf_bind())
    exits: list[int] = []
    guard = asyncio.create_task(cancel_binds_on_loss(lost, binds, grace=0.0, exit_process=exits.append))
    await started.wait()
    lost.set()
    await asyncio.wait_for(guard, WAIT)
    assert exits == [1]
    release.set()
    await binds
