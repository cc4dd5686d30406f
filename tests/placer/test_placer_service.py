"""The placer service on the embedded broker: decisions, restarts, duplicates, bad input, two replicas."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from collections.abc import Iterator

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from placer_builders import first_fit, lifecycle, pending, status, topology
from placer_kafka import TIMEOUT_S, FakeBinder, Recorder, placer, placer_settings
from prometheus_client.parser import text_string_to_metric_families
from scripted_engine import PlaceFn

from engine import Decision, Mode, PodRequest, Snapshot
from schemas import topics
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeadLetterEvent,
    Event,
    LifecyclePhase,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
)
from services.placer import service as placer_service
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.kafka.admin import ensure_topics
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.records import Received
from topoplace.telemetry import read_spans


async def _seed(producer: EventProducer, nodes: dict[str, int]) -> None:
    for name, devices in nodes.items():
        await producer.send(topics.TOPOLOGY_NODES, name, topology(name, devices))
        await producer.send(topics.NODES_STATUS, name, status(name))


async def _submit(producer: EventProducer, *pods: PendingPodEvent) -> None:
    for pod in pods:
        await producer.send(topics.PODS_PENDING, pod.uid, pod)


def _decided(recorder: Recorder) -> dict[str, list[PlacementEvent]]:
    by_pod: dict[str, list[PlacementEvent]] = collections.defaultdict(list)
    for placement in recorder.placements():
        by_pod[placement.uid].append(placement)
    return by_pod


@contextlib.contextmanager
def _in_trace(trace_id: int) -> Iterator[None]:
    """Make `trace_id` the current trace, as the watcher's span would be when it publishes."""
    parent = NonRecordingSpan(
        SpanContext(
            trace_id=trace_id,
            span_id=0x00F067AA0BA902B7,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    )
    token = otel_context.attach(trace.set_span_in_context(parent))
    try:
        yield
    finally:
        otel_context.detach(token)


def _trace_of(message: Received) -> int:
    return trace.get_current_span(message.trace_context).get_span_context().trace_id


def _metric(exposition: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no sample {name} {labels}")


def _bound(recorder: Recorder) -> set[str]:
    return {
        m.event.uid
        for m in recorder.on(topics.BINDINGS)
        if isinstance(m.event, BindingEvent) and m.event.outcome is BindingOutcome.BOUND
    }


def _assert_no_device_twice(placements: list[PlacementEvent]) -> None:
    """Distinct decisions (by decision_id) never share a device."""
    holder: dict[tuple[str, int], str] = {}
    for placement in {p.decision_id: p for p in placements if p.outcome is PlacementOutcome.PLACED}.values():
        for device in placement.devices:
            share = (placement.node, device.index)
            assert holder.setdefault(share, placement.uid) == placement.uid, f"{share} given twice"


async def test_pending_pods_become_placements_in_their_traces(fresh_broker: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    traces = tmp_path / "traces.jsonl"
    pods = [pending(f"p{i}", 2) for i in range(5)]  # 10 devices asked, 8 exist
    watcher_trace = 0x0AF7651916CD43DD8448EB211C80319C
    async with (
        EventProducer(fresh_broker, service="test") as producer,
        Recorder(fresh_broker, [topics.PLACEMENTS]) as rec,
    ):
        await _seed(producer, {"a": 4, "b": 4})
        async with placer(placer_settings(fresh_broker, traces_file=str(traces)), first_fit):
            # The watcher's span: every pending event carries its trace context.
            with _in_trace(watcher_trace):
                await _submit(producer, *pods)
            await rec.wait_for(lambda: len(rec.placements()) >= 5, "5 decisions")

    decided = _decided(rec)
    assert sorted(decided) == sorted(p.uid for p in pods)
    outcomes = collections.Counter(p[0].outcome for p in decided.values())
    assert outcomes == {PlacementOutcome.PLACED: 4, PlacementOutcome.UNSCHEDULABLE: 1}
    _assert_no_device_twice(rec.placements())
    for message in rec.on(topics.PLACEMENTS):
        event = message.event
        assert isinstance(event, PlacementEvent)
        assert message.key == (event.node if event.outcome is PlacementOutcome.PLACED else event.uid)
        # The decision travels on in the pod's trace.
        assert _trace_of(message) == watcher_trace

    spans = [s for s in read_spans(str(traces)) if s.name == "placer.decide"]
    assert len(spans) == 5
    assert {s.trace_id for s in spans} == {f"{watcher_trace:032x}"}
    assert {s.service_name for s in spans} == {"topoplace-placer"}
    by_uid = {s.attributes["k8s.pod.uid"]: s.attributes for s in spans}
    for uid, [placement] in decided.items():
        attributes = by_uid[uid]
        assert attributes["topoplace.outcome"] == placement.outcome.value
        assert attributes["topoplace.node"] == placement.node
        assert list(attributes["topoplace.devices"]) == [d.index for d in placement.devices]
        assert attributes["topoplace.candidates_considered"] == placement.candidates_considered
        assert attributes["topoplace.score"] == placement.score


async def test_duplicated_pending_event_gets_the_same_decision(
    fresh_broker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the resend window (none here) a repeat sends the same decision again.
    monkeypatch.setattr(placer_service, "RESEND_AFTER_S", 0.0)
    pod = pending("dup", 2)
    port = free_port()
    async with (
        EventProducer(fresh_broker, service="test") as producer,
        Recorder(fresh_broker, [topics.PLACEMENTS]) as rec,
    ):
        await _seed(producer, {"a": 4})
        async with placer(placer_settings(fresh_broker, health_port=port), first_fit):
            await _submit(producer, pod, pod, pending("other", 2))
            await rec.wait_for(lambda: len(rec.placements()) >= 3, "3 decisions")
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as ready:
                    assert ready.status == 200  # caught up and consuming
                async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                    exposition = await response.text()
    # Counted by outcome and cause: two fresh placements, one repeat.
    assert (
        _metric(
            exposition,
            "topoplace_placer_decisions_total",
            outcome="placed",
            cause="pending",
        )
        >= 2
    )
    assert (
        _metric(
            exposition,
            "topoplace_placer_decisions_total",
            outcome="placed",
            cause="repeated",
        )
        >= 1
    )
    assert _metric(exposition, "topoplace_placer_view", what="nodes") == 1
    assert _metric(exposition, "topoplace_placer_view", what="pods_assumed") == 2
    assert "topoplace_placer_decision_seconds_bucket" in exposition
    decided = _decided(rec)
    first, again = decided["dup"]
    assert again == first and first.outcome is PlacementOutcome.PLACED
    [other] = decided["other"]
    assert other.outcome is PlacementOutcome.PLACED
    _assert_no_device_twice(rec.placements())


async def test_restart_rebuilds_outstanding_assumptions(fresh_broker: str) -> None:
    """A decision not yet bound still holds its devices for the next placer process."""
    async with (
        EventProducer(fresh_broker, service="test") as producer,
        Recorder(fresh_broker, [topics.PLACEMENTS]) as rec,
    ):
        await _seed(producer, {"a": 2})
        async with placer(placer_settings(fresh_broker), first_fit):
            await _submit(producer, pending("first", 2))
            await rec.wait_for(lambda: len(rec.placements()) >= 1, "the first decision")
        [first] = rec.placements()
        assert first.outcome is PlacementOutcome.PLACED

        async with placer(placer_settings(fresh_broker), first_fit):
            await _submit(producer, pending("second", 2))
            await rec.wait_for(lambda: len(rec.placements()) >= 2, "the second decision")
            second = rec.placements()[1]
            assert (second.uid, second.outcome) == (
                "second",
                PlacementOutcome.UNSCHEDULABLE,
            )
            # The binder rejects the first decision: its devices free up, the parked pod fits.
            await producer.send(
                topics.BINDINGS,
                first.uid,
                BindingEvent(
                    decision_id=first.decision_id,
                    uid=first.uid,
                    namespace=first.namespace,
                    name=first.name,
                    outcome=BindingOutcome.CONFLICT,
                    reason="test",
                ),
            )
            await rec.wait_for(
                lambda: any(p.uid == "second" and p.outcome is PlacementOutcome.PLACED for p in rec.placements()),
                "the parked pod placed",
            )

        # The first pod's pending event read again (its offset was not committed before a
        # crash, say): a third process answers with the decision already standing.
        async with placer(placer_settings(fresh_broker), first_fit):
            await _submit(producer, pending("second", 2))
            await rec.wait_for(lambda: len(_decided(rec)["second"]) >= 3, "the repeated decision")
        first_placed, repeated = [p for p in _decided(rec)["second"] if p.outcome is PlacementOutcome.PLACED]
        assert repeated == first_placed


def _dies_at(uid: str) -> PlaceFn:
    """first_fit, except that the process "dies" (its task is cancelled) while deciding `uid`."""

    def place(snapshot: Snapshot, request: PodRequest, mode: Mode) -> Decision:
        if request.uid == uid:
            raise asyncio.CancelledError
        return first_fit(snapshot, request, mode)

    return place


async def test_crash_mid_stream_loses_no_pod_and_gives_no_device_twice(
    fresh_broker: str,
) -> None:
    pods = [pending(f"pod-{i:02d}", 1) for i in range(20)]  # 20 devices asked, 16 exist
    async with (
        EventProducer(fresh_broker, service="test") as producer,
        Recorder(fresh_broker, [topics.PLACEMENTS, topics.BINDINGS]) as rec,
        FakeBinder(fresh_broker) as binder,
    ):
        await _seed(producer, {"a": 8, "b": 8})
        async with placer(placer_settings(fresh_broker), _dies_at(pods[6].uid)) as first:
            await _submit(producer, *pods[:12])
            # The process dies in the middle of one pod's decision: that pending
            # message, and whatever its partition held after it, stay uncommitted.
            await asyncio.wait_for(first.task, TIMEOUT_S)
        assert pods[6].uid not in _decided(rec)
        await _submit(producer, *pods[12:])
        async with placer(placer_settings(fresh_broker), first_fit):
            await rec.wait_for(lambda: len(_decided(rec)) == len(pods), "a decision for every pod")
            await rec.wait_for(lambda: len(_bound(rec)) == 16, "16 pods bound")

    decided = _decided(rec)
    _assert_no_device_twice(rec.placements())
    assert binder.conflicts == 0
    for uid, decisions in decided.items():
        # A pod decided again after the restart got the very same decision.
        assert len({p.decision_id for p in decisions}) == 1, uid
    unschedulable = {u for u, d in decided.items() if d[0].outcome is PlacementOutcome.UNSCHEDULABLE}
    assert len(unschedulable) == 4 and unschedulable.isdisjoint(_bound(rec))


async def test_malformed_messages_go_to_the_dlq_and_the_stream_goes_on(
    fresh_broker: str,
) -> None:
    bad_topics = [topics.PODS_PENDING, topics.TOPOLOGY_NODES, topics.BINDINGS]
    dlqs = [topics.BY_NAME[t.name].dlq for t in bad_topics]
    raw = AIOKafkaProducer(bootstrap_servers=fresh_broker)
    await raw.start()
    try:
        async with (
            EventProducer(fresh_broker, service="test") as producer,
            Recorder(fresh_broker, [topics.PLACEMENTS]) as rec,
        ):
            await _seed(producer, {"a": 4})
            async with placer(placer_settings(fresh_broker), first_fit):
                await raw.send_and_wait(topics.PODS_PENDING.name, b"{not json", key=b"bad-1")
                await raw.send_and_wait(
                    topics.PODS_PENDING.name,
                    json.dumps({"uid": "bad-2", "namespace": "d", "name": "n"}).encode(),
                    key=b"bad-2",
                )
                await raw.send_and_wait(topics.TOPOLOGY_NODES.name, b"[1, 2]", key=b"x")
                await raw.send_and_wait(topics.BINDINGS.name, b'{"schema_version": 99}', key=b"y")
                await _submit(producer, pending("good", 1))
                await rec.wait_for(
                    lambda: any(p.uid == "good" for p in rec.placements()),
                    "the good pod placed",
                )
    finally:
        await raw.stop()

    dead: dict[str, list[DeadLetterEvent]] = {}
    dlq_topics = [topics.Topic(name=name, event=DeadLetterEvent, key="", compacted=False) for name in dlqs]
    async with Recorder(fresh_broker, dlq_topics) as letters:
        await letters.wait_for(lambda: len(letters.messages) >= 4, "4 dead letters")
        for message in letters.messages:
            assert isinstance(message.event, DeadLetterEvent)
            dead.setdefault(message.topic, []).append(message.event)
    pending_letters = {d.key: d for d in dead[topics.PODS_PENDING.dlq]}
    assert "value" in pending_letters["bad-1"].error
    assert "required field" in pending_letters["bad-2"].error and "resource_version" in pending_letters["bad-2"].error
    assert dead[topics.TOPOLOGY_NODES.dlq][0].key == "x"
    assert "schema_version" in dead[topics.BINDINGS.dlq][0].error
    assert {d.service for ds in dead.values() for d in ds} == {"topoplace-placer"}


async def test_two_replicas_share_the_pending_pods_and_never_give_a_device_twice(
    fresh_broker: str,
) -> None:
    deciders: dict[str, list[str]] = {"one": [], "two": []}

    def recording(name: str):  # type: ignore[no-untyped-def]
        def place(snapshot: Snapshot, request: PodRequest, mode: Mode) -> Decision:
            deciders[name].append(request.uid)
            return first_fit(snapshot, request, mode)

        return place

    pods = [pending(f"pod-{i:02d}", 1) for i in range(24)]  # 24 devices asked, 16 exist
    async with (
        EventProducer(fresh_broker, service="test") as producer,
        Recorder(fresh_broker, [topics.PLACEMENTS, topics.BINDINGS]) as rec,
        FakeBinder(fresh_broker) as binder,
    ):
        await _seed(producer, {"a": 8, "b": 8})
        async with (
            placer(placer_settings(fresh_broker), recording("one")),
            placer(placer_settings(fresh_broker), recording("two")),
        ):
            await _submit(producer, *pods)

            def settled() -> bool:
                decided = _decided(rec)
                rejected = {
                    m.event.decision_id
                    for m in rec.on(topics.BINDINGS)
                    if isinstance(m.event, BindingEvent) and m.event.outcome is BindingOutcome.CONFLICT
                }
                if len(_bound(rec)) != 16 or len(decided) != len(pods):
                    return False
                for uid, decisions in decided.items():
                    if uid in binder.bound:
                        continue
                    outstanding = [
                        p for p in decisions if p.outcome is PlacementOutcome.PLACED and p.decision_id not in rejected
                    ]
                    if outstanding or not any(p.outcome is PlacementOutcome.UNSCHEDULABLE for p in decisions):
                        return False
                return True

            await rec.wait_for(settled, "16 pods bound and 8 reported unschedulable")

    assert deciders["one"] and deciders["two"], deciders  # both replicas took pending partitions
    rejected = {
        m.event.decision_id
        for m in rec.on(topics.BINDINGS)
        if isinstance(m.event, BindingEvent) and m.event.outcome is BindingOutcome.CONFLICT
    }
    # Whatever the replicas raced on, the decisions still standing never share a device.
    _assert_no_device_twice([p for p in rec.placements() if p.decision_id not in rejected])
    assert len({(p.node, d.index) for p in binder.bound.values() for d in p.devices}) == 16


async def test_placer_rebuilds_bound_pods_from_the_lifecycle(fresh_broker: str) -> None:
    """Pods bound before the placer started hold their devices (the cluster's word, replayed)."""
    pod_trace = 0x5B8AA5A2D2C872E8321CF37308D69DF2
    async with (
        EventProducer(fresh_broker, service="test") as producer,
        Recorder(fresh_broker, [topics.PLACEMENTS]) as rec,
    ):
        await _seed(producer, {"a": 4})
        event: Event = lifecycle("old", LifecyclePhase.BOUND, "a", (0, 1, 2))
        await producer.send(topics.PODS_LIFECYCLE, "old", event)
        async with placer(placer_settings(fresh_broker), first_fit):
            with _in_trace(pod_trace):
                await _submit(producer, pending("new", 2))
            await rec.wait_for(lambda: len(rec.placements()) >= 1, "a decision")
            [decision] = rec.placements()
            assert decision.outcome is PlacementOutcome.UNSCHEDULABLE
            await producer.send(topics.PODS_LIFECYCLE, "old", lifecycle("old", LifecyclePhase.DELETED))
            await rec.wait_for(lambda: len(rec.placements()) >= 2, "the retry")
            assert rec.placements()[1].outcome is PlacementOutcome.PLACED
            assert [d.index for d in rec.placements()[1].devices] == [0, 1]
    # The retry, caused by another pod's deletion, still belongs to the parked pod's trace.
    assert [_trace_of(m) for m in rec.on(topics.PLACEMENTS)] == [pod_trace, pod_trace]


async def test_the_placer_goes_on_deciding_after_its_broker_restarted_empty() -> None:
    port = free_port()
    first, second = EmbeddedBroker(port=port), EmbeddedBroker(port=port)
    await first.start()
    try:
        await ensure_topics(first.bootstrap)
        async with placer(placer_settings(first.bootstrap), first_fit) as running:
            async with (
                EventProducer(first.bootstrap, service="test") as producer,
                Recorder(first.bootstrap, [topics.PLACEMENTS]) as rec,
            ):
                await _seed(producer, {"a": 4})
                await _submit(producer, pending("before", 1))
                await rec.wait_for(lambda: len(rec.placements()) >= 1, "the decision before the restart")
            first.kill_now()  # as SIGKILL: the in-memory topics are gone
            await second.start()
            await ensure_topics(second.bootstrap)
            async with (
                EventProducer(second.bootstrap, service="test") as producer,
                Recorder(second.bootstrap, [topics.PLACEMENTS]) as rec,
            ):
                await _seed(producer, {"b": 4})  # what the collectors republish
                await _submit(producer, pending("after", 1))
                await rec.wait_for(
                    lambda: any(p.uid == "after" for p in rec.placements()), "a decision after the restart", 60
                )
            assert not running.task.done()
    finally:
        first.kill_now()
        await second.stop()
    (after,) = [p for p in rec.placements() if p.uid == "after"]
    assert after.outcome is PlacementOutcome.PLACED
