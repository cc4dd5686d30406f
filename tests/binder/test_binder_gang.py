"""Gang decisions against the test API server: all or nothing, members failing mid-way, unschedulable gangs."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest
from binder_support import FaultProxy, PodFactory, RecordingProducer, WatchedCluster, gpus, placement_for
from kubernetes_asyncio import client
from opentelemetry import context as otel_context

from schemas import annotations as pod_annotations
from schemas import topics
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    GangPlacementEvent,
    GangTierRefusal,
    PlacementEvent,
    PlacementOutcome,
)
from services.binder.apply import PodBinder
from services.binder.conditions import ConditionWriter
from services.binder.gang import BIND_ROUNDS, GangHandler, unplaced_reason
from services.binder.handler import BindingSteps
from services.binder.kube_events import EventRecorder
from services.binder.ledger import DeviceLedger
from services.binder.reporting import PodReporter
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer

NODE = "gpu-node-1"
POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=5, deadline_seconds=10.0)


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


async def no_sleep(seconds: float) -> None:
    return None


class GangHarness:
    def __init__(self, core: client.CoreV1Api, watched: WatchedCluster | None = None) -> None:
        self.ledger = watched.ledger if watched is not None else DeviceLedger()
        self.producer = RecordingProducer()
        self.reporter = PodReporter(
            EventRecorder(core, component="topoplace"),
            ConditionWriter(core, policy=POLICY, sleep=no_sleep),
            watch=None if watched is None else watched.cluster,
        )
        steps = BindingSteps(
            ledger=self.ledger,
            binder=PodBinder(core, policy=POLICY, sleep=no_sleep),
            reporter=self.reporter,
            cluster=None if watched is None else watched.cluster,
        )
        self.handler = GangHandler(steps=steps, producer=self.producer)

    async def handle(self, gang: GangPlacementEvent) -> dict[str, BindingEvent]:
        await self.handler(Message(event=gang))
        await self.reporter.drain()
        outcomes = {}
        for sent in self.producer.sent[-len(gang.members) :]:
            assert sent.topic == topics.BINDINGS.name and isinstance(sent.event, BindingEvent)
            assert sent.key == sent.event.uid
            outcomes[sent.event.uid] = sent.event
        assert set(outcomes) == {m.uid for m in gang.members}  # every member reported, once
        return outcomes


def gang_of(members: list[PlacementEvent], outcome: PlacementOutcome = PlacementOutcome.PLACED) -> GangPlacementEvent:
    return GangPlacementEvent(
        decision_id=f"g-{uuid.uuid4().hex[:8]}",
        name="default/train",
        namespace="default",
        outcome=outcome,
        members=tuple(members),
        reason="" if outcome is PlacementOutcome.PLACED else "no tier-1 hypernode holds 4 members",
    )


def placed(pods: list[dict[str, Any]]) -> list[PlacementEvent]:
    return [placement_for(pod, NODE, (DeviceAssignment(index=i),)) for i, pod in enumerate(pods)]


def node_of(kube_api: KubeApiServer, pod: dict[str, Any]) -> str | None:
    stored: dict[str, Any] = kube_api.store.get("pods", pod["metadata"]["name"], "default")
    node: str | None = stored["spec"].get("nodeName")
    return node


def events_of(kube_api: KubeApiServer, pod: dict[str, Any]) -> list[dict[str, Any]]:
    items, _ = kube_api.store.list("events", "default")
    return [e for e in items if e["involvedObject"]["uid"] == pod["metadata"]["uid"]]


def binding_calls(proxy: FaultProxy) -> list[int]:
    return [seen.status for seen in proxy.calls("POST", "/binding")]


async def test_every_member_is_bound_with_one_request_each(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(3)]
    gang = gang_of(placed(pods))
    harness = GangHarness(core)
    outcomes = await harness.handle(gang)

    assert {o.outcome for o in outcomes.values()} == {BindingOutcome.BOUND}
    assert all(node_of(kube_api, pod) == NODE for pod in pods)
    for member in gang.members:
        stored = kube_api.store.get("pods", member.name, "default")
        assert pod_annotations.decode_devices(stored["metadata"]["annotations"][pod_annotations.DEVICES]) == (
            member.devices
        )
        assert harness.ledger.is_bound(member.uid)
    # without a watch each pod is read once in the checks, then bound with one request
    assert binding_calls(proxy) == [201, 201, 201]


async def test_a_member_deleted_before_binding_means_nothing_is_bound(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(3)]
    gang = gang_of(placed(pods))
    kube_api.store.delete("pods", pods[1]["metadata"]["name"], namespace="default")
    harness = GangHarness(core)
    outcomes = await harness.handle(gang)

    gone = outcomes[pods[1]["metadata"]["uid"]]
    assert gone.outcome is BindingOutcome.FAILED and "deleted" in gone.reason
    for pod in (pods[0], pods[2]):
        other = outcomes[pod["metadata"]["uid"]]
        assert other.outcome is BindingOutcome.CONFLICT
        assert "not bound" in other.reason and pods[1]["metadata"]["name"] in other.reason
        assert node_of(kube_api, pod) is None
        warnings = [e for e in events_of(kube_api, pod) if e["reason"] == "FailedScheduling"]
        assert len(warnings) == 1
    assert binding_calls(proxy) == []
    assert harness.ledger.pod_count() == 0


async def test_members_colliding_with_each_other_bind_nothing(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(2)]
    same_device = [placement_for(pod, NODE, (DeviceAssignment(index=4),)) for pod in pods]
    harness = GangHarness(core)
    outcomes = await harness.handle(gang_of(same_device))

    second = outcomes[pods[1]["metadata"]["uid"]]
    assert second.outcome is BindingOutcome.CONFLICT and "device 4" in second.reason
    assert outcomes[pods[0]["metadata"]["uid"]].outcome is BindingOutcome.CONFLICT
    assert binding_calls(proxy) == []
    assert harness.ledger.pod_count() == 0


async def test_a_member_failing_mid_way_is_failed_while_the_others_stay_bound(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(3)]
    gang = gang_of(placed(pods))
    victim = pods[2]["metadata"]["name"]
    # Deleted after the checks, right before its own Binding.
    proxy.before("POST", f"/pods/{victim}/binding", lambda: kube_api.store.delete("pods", victim, namespace="default"))
    harness = GangHarness(core)
    outcomes = await harness.handle(gang)

    failed = outcomes[pods[2]["metadata"]["uid"]]
    assert failed.outcome is BindingOutcome.FAILED and "deleted" in failed.reason
    for pod in pods[:2]:
        assert outcomes[pod["metadata"]["uid"]].outcome is BindingOutcome.BOUND
        assert node_of(kube_api, pod) == NODE
        assert harness.ledger.holding(pod["metadata"]["uid"]) is not None
    assert harness.ledger.holding(pods[2]["metadata"]["uid"]) is None  # no hold of a member not bound
    assert harness.ledger.holders(NODE, 2) == {}


async def test_a_member_whose_retries_ran_out_while_the_others_were_bound_is_bound_again(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(3)]
    gang = gang_of(placed(pods))
    late = pods[1]["metadata"]["name"]
    proxy.fail("POST", f"/pods/{late}/binding", 503, times=POLICY.max_attempts)  # its first budget, spent
    harness = GangHarness(core)
    outcomes = await harness.handle(gang)

    assert {o.outcome for o in outcomes.values()} == {BindingOutcome.BOUND}
    for pod in pods:
        assert node_of(kube_api, pod) == NODE
        assert harness.ledger.holding(pod["metadata"]["uid"]) is not None
    assert binding_calls(proxy).count(503) == POLICY.max_attempts


async def test_a_member_is_bound_again_at_most_so_many_times_then_reported_failed(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(2)]
    gang = gang_of(placed(pods))
    late = pods[1]["metadata"]["name"]
    proxy.fail("POST", f"/pods/{late}/binding", 503, times=POLICY.max_attempts * BIND_ROUNDS + 1)
    harness = GangHarness(core)
    outcomes = await harness.handle(gang)

    failed = outcomes[pods[1]["metadata"]["uid"]]
    assert failed.outcome is BindingOutcome.FAILED and "gave up" in failed.reason
    assert outcomes[pods[0]["metadata"]["uid"]].outcome is BindingOutcome.BOUND
    assert sorted(binding_calls(proxy)) == [201] + [503] * (POLICY.max_attempts * BIND_ROUNDS)
    assert harness.ledger.holding(pods[1]["metadata"]["uid"]) is None  # given up: its devices are free
    assert harness.ledger.holders(NODE, 1) == {}


async def test_no_member_is_bound_again_when_none_was_bound(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    # Nothing committed yet: the placer may as well place the whole gang again.
    pods = [make_pod() for _ in range(2)]
    gang = gang_of(placed(pods))
    proxy.fail("POST", "/binding", 503, times=2 * POLICY.max_attempts)
    harness = GangHarness(core)
    outcomes = await harness.handle(gang)

    assert {o.outcome for o in outcomes.values()} == {BindingOutcome.FAILED}
    assert binding_calls(proxy) == [503] * (2 * POLICY.max_attempts)


async def test_a_redelivered_gang_decision_reports_the_bound_members_bound(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(2)]
    gang = gang_of(placed(pods))
    harness = GangHarness(core)
    await harness.handle(gang)
    again = await harness.handle(gang)
    assert {o.outcome for o in again.values()} == {BindingOutcome.BOUND}
    assert binding_calls(proxy) == [201, 201]  # the second copy found both bound: no Binding
    scheduled = [e for pod in pods for e in events_of(kube_api, pod) if e["reason"] == "Scheduled"]
    assert len(scheduled) == 2


async def test_an_unschedulable_gang_marks_every_member(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(3)]
    members = [placement_for(pod, "", (), outcome=PlacementOutcome.UNSCHEDULABLE, reason="") for pod in pods]
    gang = gang_of(members, PlacementOutcome.UNSCHEDULABLE)
    outcomes = await GangHarness(core).handle(gang)

    for pod in pods:
        outcome = outcomes[pod["metadata"]["uid"]]
        assert outcome.outcome is BindingOutcome.UNSCHEDULABLE and outcome.reason == gang.reason
        stored = kube_api.store.get("pods", pod["metadata"]["name"], "default")
        (condition,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "False",
            "Unschedulable",
            gang.reason,
        )
        (event,) = events_of(kube_api, pod)
        assert (event["reason"], event["type"], event["message"]) == ("FailedScheduling", "Warning", gang.reason)
    assert binding_calls(proxy) == []


async def test_with_the_watch_a_gang_needs_no_read(
    core: client.CoreV1Api,
    kube_api: KubeApiServer,
    proxy: FaultProxy,
    make_pod: PodFactory,
    watched: WatchedCluster,
    make_node: Any,
) -> None:
    make_node(NODE, 8)
    pods = [make_pod() for _ in range(2)]
    await watched.until(lambda: all(watched.cluster.pod(p["metadata"]["uid"]) for p in pods))
    await watched.until(lambda: watched.cluster.allocatable(NODE) is not None)
    watched.ledger.set_node_devices(NODE, gpus(8))
    outcomes = await GangHarness(core, watched).handle(gang_of(placed(pods)))
    assert {o.outcome for o in outcomes.values()} == {BindingOutcome.BOUND}
    pod_requests = [(s.method, s.path.rsplit("/", 1)[-1]) for s in proxy.log if "/pods" in s.path]
    assert pod_requests == [("POST", "binding"), ("POST", "binding")]


async def test_a_placed_gang_with_an_unschedulable_member_is_refused_whole(
    core: client.CoreV1Api, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(2)]
    members = placed(pods[:1]) + [placement_for(pods[1], "", (), outcome=PlacementOutcome.UNSCHEDULABLE)]
    outcomes = await GangHarness(core).handle(gang_of(members))
    assert {o.outcome for o in outcomes.values()} == {BindingOutcome.FAILED}
    assert all("members[1].outcome" in o.reason for o in outcomes.values())
    assert binding_calls(proxy) == []


async def test_a_message_that_is_no_gang_is_refused(core: client.CoreV1Api) -> None:
    harness = GangHarness(core)
    with pytest.raises(TypeError, match="GangPlacementEvent"):
        await harness.handler(Message(event=None))
    assert harness.producer.sent == []


REFUSED = (
    GangTierRefusal(tier=1, tier_name="rack", reason="at most 3 of 4 pending member(s) fit in one hypernode (rack-a)"),
    GangTierRefusal(
        tier=2, tier_name="spine", reason="at most 3 of 4 pending member(s) fit in one hypernode (spine-0)"
    ),
)


async def test_an_unschedulable_gangs_members_are_told_why_each_tier_was_refused(
    core: client.CoreV1Api, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    pods = [make_pod() for _ in range(2)]
    members = [placement_for(pod, "", (), outcome=PlacementOutcome.UNSCHEDULABLE, reason="") for pod in pods]
    gang = msgspec.structs.replace(gang_of(members, PlacementOutcome.UNSCHEDULABLE), refused_tiers=REFUSED)
    outcomes = await GangHarness(core).handle(gang)

    expected = (
        "no tier-1 hypernode holds 4 members; "
        "tier 1 (rack): at most 3 of 4 pending member(s) fit in one hypernode (rack-a); "
        "tier 2 (spine): at most 3 of 4 pending member(s) fit in one hypernode (spine-0)"
    )
    for pod in pods:
        assert outcomes[pod["metadata"]["uid"]].reason == expected
        stored = kube_api.store.get("pods", pod["metadata"]["name"], "default")
        (condition,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert condition["message"] == expected
        (event,) = events_of(kube_api, pod)
        assert event["message"] == expected


def test_a_reason_naming_the_refused_tiers_already_is_kept_as_it_is() -> None:
    said = f"gang default/train: no hypernode of tier <= 2 holds it; {REFUSED[0].text()}; {REFUSED[1].text()}"
    member = PlacementEvent(
        decision_id="d",
        uid="u",
        namespace="default",
        name="w-0",
        pod_resource_version="1",
        outcome=PlacementOutcome.UNSCHEDULABLE,
        reason=said,
    )
    gang = msgspec.structs.replace(
        gang_of([member], PlacementOutcome.UNSCHEDULABLE), reason=said, refused_tiers=REFUSED
    )
    assert unplaced_reason(member, gang) == said
    assert unplaced_reason(member, msgspec.structs.replace(gang, refused_tiers=())) == said
