"""Applying placements against the test Kubernetes API server (through a fault-injecting proxy)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from binder_support import FaultProxy, PodFactory, RecordingProducer, placement_for
from kubernetes_asyncio import client
from opentelemetry import context as otel_context

from schemas import annotations as pod_annotations
from schemas import topics
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    PlacementEvent,
    PlacementOutcome,
)
from schemas.topology import Device, Vendor
from services.binder.apply import PodBinder
from services.binder.conditions import ConditionWriter
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.kube_events import EventRecorder
from services.binder.ledger import DeviceLedger, Holding
from services.binder.reporting import PodReporter
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer

NODE = "gpu-node-1"
TWO_GPUS = (DeviceAssignment(index=0, uuid="GPU-0"), DeviceAssignment(index=1, uuid="GPU-1"))
POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=5, deadline_seconds=10.0)


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


async def no_sleep(seconds: float) -> None:
    return None


class Harness:
    def __init__(self, core: client.CoreV1Api, ledger: DeviceLedger | None = None) -> None:
        self.ledger = ledger or DeviceLedger()
        self.producer = RecordingProducer()
        self.reporter = PodReporter(
            EventRecorder(core, component="topoplace"), ConditionWriter(core, policy=POLICY, sleep=no_sleep), watch=None
        )
        self.steps = BindingSteps(
            ledger=self.ledger, binder=PodBinder(core, policy=POLICY, sleep=no_sleep), reporter=self.reporter
        )
        self.handler = PlacementHandler(steps=self.steps, producer=self.producer)

    async def handle(self, placement: PlacementEvent) -> BindingEvent:
        await self.handler(Message(event=placement))
        await self.reporter.drain()  # Events and conditions go out in the background
        sent = self.producer.sent[-1]
        assert sent.topic == topics.BINDINGS.name and sent.key == placement.uid
        assert isinstance(sent.event, BindingEvent)
        return sent.event


@pytest.fixture
def harness(core: client.CoreV1Api) -> Harness:
    return Harness(core)


def stored_pod(kube_api: KubeApiServer, pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return kube_api.store.get("pods", meta["name"], meta["namespace"])


def events_of(kube_api: KubeApiServer, pod: dict[str, Any]) -> list[dict[str, Any]]:
    items, _ = kube_api.store.list("events", pod["metadata"]["namespace"])
    return [e for e in items if e["involvedObject"]["uid"] == pod["metadata"]["uid"]]


def binding_calls(proxy: FaultProxy) -> list[int]:
    return [seen.status for seen in proxy.calls("POST", "/binding")]


async def test_bind_is_one_request_carrying_the_annotations(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    placement = placement_for(pod, NODE, TWO_GPUS)
    outcome = await harness.handle(placement)

    assert outcome.outcome is BindingOutcome.BOUND
    assert outcome.attempts == 1
    assert (outcome.node, outcome.devices, outcome.decision_id) == (NODE, TWO_GPUS, placement.decision_id)
    after = stored_pod(kube_api, pod)
    assert after["spec"]["nodeName"] == NODE
    notes = after["metadata"]["annotations"]
    assert pod_annotations.decode_devices(notes[pod_annotations.DEVICES]) == TWO_GPUS
    assert notes[pod_annotations.NODE] == NODE
    assert notes[pod_annotations.DECISION] == placement.decision_id
    # one request for the pod: the Binding carries the annotations, the server sets both at once
    pod_requests = [(s.method, s.path.rsplit("/", 1)[-1]) for s in proxy.log if "/pods" in s.path]
    assert pod_requests == [("POST", "binding")]
    assert after["metadata"]["resourceVersion"] == str(int(pod["metadata"]["resourceVersion"]) + 1)
    scheduled = [c for c in after["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    assert harness.ledger.holding(placement.uid) == Holding(pod_uid=placement.uid, node=NODE, devices=TWO_GPUS)


async def test_duplicated_placement_binds_once_and_reports_bound_twice(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    placement = placement_for(pod, NODE, TWO_GPUS)
    first = await harness.handle(placement)
    second = await harness.handle(placement)

    assert first.outcome is BindingOutcome.BOUND
    assert second.outcome is BindingOutcome.BOUND
    # without a watch, the second copy's Binding meets 409 and a read says the pod is ours
    assert binding_calls(proxy) == [201, 409]
    assert len(proxy.calls("GET", pod["metadata"]["name"])) == 1
    assert stored_pod(kube_api, pod)["spec"]["nodeName"] == NODE
    scheduled = [e for e in events_of(kube_api, pod) if e["reason"] == "Scheduled"]
    assert len(scheduled) == 1


async def test_pod_bound_elsewhere_is_a_conflict_and_keeps_its_annotation(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod(node="other-node")
    outcome = await harness.handle(placement_for(pod, NODE, TWO_GPUS))

    assert outcome.outcome is BindingOutcome.CONFLICT
    assert "other-node" in outcome.reason
    after = stored_pod(kube_api, pod)
    assert after["spec"]["nodeName"] == "other-node"
    assert pod_annotations.DEVICES not in (after["metadata"].get("annotations") or {})
    assert proxy.calls("PATCH", pod["metadata"]["name"]) == []
    assert harness.ledger.holding(pod["metadata"]["uid"]) is None


async def test_pod_bound_to_the_same_node_with_other_devices_is_a_conflict(
    harness: Harness, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    pod = make_pod()
    assert (
        await harness.handle(placement_for(pod, NODE, (DeviceAssignment(index=3),)))
    ).outcome is BindingOutcome.BOUND
    outcome = await harness.handle(placement_for(pod, NODE, TWO_GPUS))
    assert outcome.outcome is BindingOutcome.CONFLICT
    # the ledger still has the devices the pod really holds
    assert harness.ledger.holding(pod["metadata"]["uid"]).devices == (DeviceAssignment(index=3),)  # type: ignore[union-attr]


async def test_missing_pod_fails(harness: Harness, kube_api: KubeApiServer, make_pod: PodFactory) -> None:
    pod = make_pod()
    kube_api.store.delete("pods", pod["metadata"]["name"], namespace=pod["metadata"]["namespace"])
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.FAILED
    assert "deleted" in outcome.reason
    assert harness.ledger.holding(pod["metadata"]["uid"]) is None


async def test_pod_recreated_under_its_name_is_not_bound(
    harness: Harness, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    old = make_pod()
    placement = placement_for(old, NODE)
    kube_api.store.delete("pods", old["metadata"]["name"], namespace="default")
    new = make_pod(name=old["metadata"]["name"])
    outcome = await harness.handle(placement)
    assert outcome.outcome is BindingOutcome.FAILED
    assert not stored_pod(kube_api, new)["spec"].get("nodeName")


async def test_pod_deleted_between_read_and_binding_fails(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    proxy.before(
        "POST",
        "/binding",
        lambda: kube_api.store.delete("pods", pod["metadata"]["name"], namespace="default"),
    )
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.FAILED
    assert "deleted" in outcome.reason
    assert binding_calls(proxy) == [404]


async def test_pod_bound_elsewhere_just_before_the_binding_is_a_conflict(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    name = pod["metadata"]["name"]
    binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": "other-node"}}
    proxy.before("POST", "/binding", lambda: kube_api.store.bind("default", name, binding))
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.CONFLICT
    assert binding_calls(proxy) == [409]
    assert stored_pod(kube_api, pod)["spec"]["nodeName"] == "other-node"


async def test_devices_colliding_with_the_ledger_are_a_conflict_without_binding(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    ledger = DeviceLedger()
    ledger.set_node_devices(
        NODE,
        [Device(index=i, uuid=f"GPU-{i}", vendor=Vendor.NVIDIA, model="H100", memory_mib=80_000) for i in range(8)],
    )
    ledger.hold(Holding(pod_uid="someone-else", node=NODE, devices=(DeviceAssignment(index=1),)))
    harness = Harness(core, ledger)
    pod = make_pod()
    outcome = await harness.handle(placement_for(pod, NODE, TWO_GPUS))

    assert outcome.outcome is BindingOutcome.CONFLICT
    assert "device 1" in outcome.reason and "someone-else" in outcome.reason
    assert outcome.attempts == 0
    assert binding_calls(proxy) == []
    assert not stored_pod(kube_api, pod)["spec"].get("nodeName")
    assert ledger.holding(pod["metadata"]["uid"]) is None
    warnings = [e for e in events_of(kube_api, pod) if e["reason"] == "FailedScheduling"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning"


@pytest.mark.parametrize("statuses", [[500], [429, 503], [500, 429, 502]])
async def test_transient_errors_are_retried_until_bound(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory, statuses: list[int]
) -> None:
    pod = make_pod()
    for status in statuses:
        proxy.fail("POST", "/binding", status)
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.BOUND
    assert outcome.attempts == 1 + len(statuses)
    assert binding_calls(proxy) == [*statuses, 201]
    assert stored_pod(kube_api, pod)["spec"]["nodeName"] == NODE


async def test_transient_errors_on_the_settling_read_count_as_attempts(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    name = pod["metadata"]["name"]
    proxy.fail("POST", "/binding", 503, forward_first=True)  # bound, reply lost
    proxy.fail("GET", f"/pods/{name}", 500)
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.BOUND
    assert outcome.attempts == 3
    assert [s.status for s in proxy.calls("GET", f"/pods/{name}")] == [500, 200]


async def test_lost_binding_reply_then_409_is_bound(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    # The server binds the pod, but the reply is lost: the retry meets 409, the re-read says it is ours.
    pod = make_pod()
    proxy.fail("POST", "/binding", 503, forward_first=True)
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.BOUND
    assert outcome.attempts == 2
    assert binding_calls(proxy) == [503, 409]
    assert stored_pod(kube_api, pod)["spec"]["nodeName"] == NODE


async def test_gives_up_after_the_attempts_and_frees_the_devices(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    proxy.fail("POST", "/binding", 500, times=100)
    outcome = await harness.handle(placement_for(pod, NODE, TWO_GPUS))
    assert outcome.outcome is BindingOutcome.FAILED
    assert outcome.attempts == POLICY.max_attempts
    assert "gave up" in outcome.reason and "500" in outcome.reason
    assert harness.ledger.holding(pod["metadata"]["uid"]) is None
    assert harness.ledger.collisions("next-pod", NODE, TWO_GPUS) == ()


async def test_refused_binding_is_not_retried(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    proxy.fail("POST", "/binding", 422)
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.FAILED
    assert binding_calls(proxy) == [422]
    assert "422" in outcome.reason


async def test_older_resource_version_is_still_bindable(
    harness: Harness, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    pod = make_pod()
    placement = placement_for(pod, NODE)
    kube_api.store.patch(
        "pods",
        pod["metadata"]["name"],
        "application/merge-patch+json",
        {"metadata": {"labels": {"touched": "yes"}, "resourceVersion": pod["metadata"]["resourceVersion"]}},
        namespace="default",
    )
    assert stored_pod(kube_api, pod)["metadata"]["resourceVersion"] != placement.pod_resource_version
    outcome = await harness.handle(placement)
    assert outcome.outcome is BindingOutcome.BOUND


async def test_events_are_created_like_kube_schedulers(
    harness: Harness, kube_api: KubeApiServer, make_pod: PodFactory
) -> None:
    pod = make_pod()
    await harness.handle(placement_for(pod, NODE, TWO_GPUS))
    (scheduled,) = events_of(kube_api, pod)
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    assert scheduled["reason"] == "Scheduled"
    assert scheduled["type"] == "Normal"
    assert scheduled["message"].startswith(f"Successfully assigned {ns}/{name} to {NODE}")
    assert "devices 0,1" in scheduled["message"]
    assert scheduled["involvedObject"]["kind"] == "Pod" and scheduled["involvedObject"]["name"] == name
    assert scheduled["source"]["component"] == "topoplace"


async def test_unschedulable_placement_sets_the_condition_and_the_event(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    harness = Harness(core)
    seen_at_send: list[int] = []

    async def count_events() -> None:
        seen_at_send.append(len(events_of(kube_api, pod)))

    harness.producer = RecordingProducer(on_send=count_events)
    harness.handler = PlacementHandler(steps=harness.steps, producer=harness.producer)
    reason = "0/16 nodes fit: 12 have too few free GPUs, 4 lack NVLink between 4 GPUs"
    placement = placement_for(pod, "", (), outcome=PlacementOutcome.UNSCHEDULABLE, reason=reason)
    outcome = await harness.handle(placement)

    assert outcome.outcome is BindingOutcome.UNSCHEDULABLE
    assert outcome.reason == reason
    (event,) = events_of(kube_api, pod)
    assert (event["reason"], event["type"], event["message"]) == ("FailedScheduling", "Warning", reason)
    assert seen_at_send == [0]  # the outcome does not wait for the Event: it goes out in the background
    after = stored_pod(kube_api, pod)
    assert binding_calls(proxy) == [] and not after["spec"].get("nodeName")
    (condition,) = after["status"]["conditions"]
    assert condition["type"] == "PodScheduled" and condition["status"] == "False"
    assert (condition["reason"], condition["message"]) == ("Unschedulable", reason)
    assert after["status"]["phase"] == "Pending"


async def test_failed_event_does_not_fail_the_binding(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    proxy.fail("POST", "/events", 500, times=10)
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.BOUND
    assert stored_pod(kube_api, pod)["spec"]["nodeName"] == NODE
    assert events_of(kube_api, pod) == []


async def test_invalid_placement_is_reported_failed_without_api_writes(
    harness: Harness, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    outcome = await harness.handle(placement_for(pod, ""))
    assert outcome.outcome is BindingOutcome.FAILED
    assert "node" in outcome.reason
    assert binding_calls(proxy) == []


async def test_a_message_that_is_no_placement_is_refused(harness: Harness) -> None:
    with pytest.raises(TypeError, match="PlacementEvent"):
        await harness.handler(Message(event=None))
    assert harness.producer.sent == []


async def test_binding_carries_the_uid_so_a_recreated_pod_is_not_bound(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    name = pod["metadata"]["name"]
    recreated: list[dict[str, Any]] = []

    def recreate() -> None:
        kube_api.store.delete("pods", name, namespace="default")
        recreated.append(make_pod(name=name))

    proxy.before("POST", "/binding", recreate)
    outcome = await harness.handle(placement_for(pod, NODE))
    assert outcome.outcome is BindingOutcome.FAILED
    assert binding_calls(proxy) == [409]
    assert not stored_pod(kube_api, recreated[0])["spec"].get("nodeName")


async def test_the_unschedulable_condition_is_retried_and_keeps_the_other_conditions(
    harness: Harness, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    pod = make_pod()
    name = pod["metadata"]["name"]
    kube_api.store.patch(  # a condition someone else wrote; the strategic merge must leave it
        "pods",
        name,
        "application/strategic-merge-patch+json",
        {"status": {"conditions": [{"type": "DisruptionTarget", "status": "False"}]}},
        namespace="default",
        status_only=True,
    )
    proxy.fail("PATCH", f"/pods/{name}/status", 503, times=2)
    placement = placement_for(pod, "", (), outcome=PlacementOutcome.UNSCHEDULABLE, reason="too few GPUs")
    outcome = await harness.handle(placement)

    assert outcome.outcome is BindingOutcome.UNSCHEDULABLE
    assert [s.status for s in proxy.calls("PATCH", f"/pods/{name}/status")] == [503, 503, 200]
    conditions = {c["type"]: c for c in stored_pod(kube_api, pod)["status"]["conditions"]}
    assert set(conditions) == {"DisruptionTarget", "PodScheduled"}
    assert (conditions["PodScheduled"]["status"], conditions["PodScheduled"]["message"]) == ("False", "too few GPUs")
