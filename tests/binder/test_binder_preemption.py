"""The binder carries out a preemption against the test API server: DisruptionTarget, deletion with the uid
as precondition, nominatedNodeName, Preempted Events; nothing forged is evicted; the freed devices are held
for the preemptor from any third pod, also after a restart; victims evicted for nothing are counted."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from binder_support import FaultProxy, RecordingProducer, WatchedCluster, placement_for
from kubernetes_asyncio import client
from prometheus_client import REGISTRY
from test_binder_checks import Message, Reporter, new_node, writes

from schemas.events import BindingEvent, BindingOutcome, DeviceAssignment, PlacementEvent, PlacementOutcome
from schemas.events import PreemptionVictim as Victim
from services.binder.apply import PodBinder
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.pod_reader import PodReader
from services.binder.preemption import PreemptionExecutor
from services.binder.reservations import HeldRoom, Reservations
from services.binder.retry import BackoffPolicy
from topoplace.dev.kubeapi import KubeApiServer

POLICY = BackoffPolicy(base_seconds=0.01, cap_seconds=0.05, max_attempts=3, deadline_seconds=5.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Binder:
    """A binder's steps with preemption, over one Reservations (a restart makes another)."""

    def __init__(self, core: client.CoreV1Api, watched: WatchedCluster, clock: Clock) -> None:
        self.reservations = Reservations(hold_seconds=60.0, pod_gone=watched.cluster.knows_gone)
        self.steps = BindingSteps(
            ledger=watched.ledger,
            binder=PodBinder(core),
            reporter=Reporter(),
            cluster=watched.cluster,
            reader=PodReader(core),
            preemption=PreemptionExecutor(
                core, watched.cluster, self.reservations, component="topoplace", policy=POLICY, clock=clock
            ),
            held=HeldRoom(self.reservations, watched.cluster, clock),
        )

    async def handle(self, placement: PlacementEvent) -> BindingEvent:
        producer = RecordingProducer()
        await PlacementHandler(steps=self.steps, producer=producer)(Message(event=placement))
        event = producer.sent[-1].event
        assert isinstance(event, BindingEvent)
        return event


@pytest.fixture
def clock() -> Clock:
    return Clock()


def classes(kube_api: KubeApiServer) -> None:
    known = {c["metadata"]["name"] for c in kube_api.store.list("priorityclasses.scheduling.k8s.io")[0]}
    for name, value in (("top", 2000), ("high", 1000), ("mid", 500), ("low", 1)):
        if name not in known:
            kube_api.store.create("priorityclasses.scheduling.k8s.io", {"metadata": {"name": name}, "value": value})


def pod(kube_api: KubeApiServer, priority_class: str, **spec: Any) -> dict[str, Any]:
    classes(kube_api)
    body = {
        "metadata": {"name": f"pod-{uuid.uuid4().hex[:8]}", "namespace": "default"},
        "spec": {
            "schedulerName": "topoplace",
            "priorityClassName": priority_class,
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "2"}}}],
            **spec,
        },
    }
    return kube_api.store.create("pods", body, namespace="default")


def devices(*indices: int) -> tuple[DeviceAssignment, ...]:
    return tuple(DeviceAssignment(index=i) for i in indices)


def victim(obj: dict[str, Any]) -> Victim:
    meta = obj["metadata"]
    return Victim(uid=meta["uid"], namespace=meta["namespace"], name=meta["name"], priority=obj["spec"]["priority"])


def nominating(
    preemptor: dict[str, Any], node: str, *victims: dict[str, Any], gets: tuple[DeviceAssignment, ...] = ()
) -> PlacementEvent:
    """The placer's nominating decision: `gets`, the device shares it chose for the preemptor there."""
    return placement_for(
        preemptor,
        "",
        devices=(),
        outcome=PlacementOutcome.UNSCHEDULABLE,
        nominated_node=node,
        victims=tuple(victim(v) for v in victims),
        priority=preemptor["spec"]["priority"],
        reason="preempting",
        nominated_devices=gets,
    )


def half(index: int) -> DeviceAssignment:
    return DeviceAssignment(index=index, memory_mib=40_000, cores=50)


async def running_pods(
    kube_api: KubeApiServer,
    binder: Binder,
    watched: WatchedCluster,
    node: str,
    *sets: tuple[int, ...] | tuple[DeviceAssignment, ...],
) -> list[dict[str, Any]]:
    """Low-priority pods bound by the binder itself to `node`, each on its device set (sealed)."""
    await watched.until(lambda: watched.cluster.node_rules(node) is not None)  # the binder refuses an unseen node
    bound = []
    for held in sets:
        obj = pod(kube_api, "low")
        shares = tuple(d if isinstance(d, DeviceAssignment) else DeviceAssignment(index=d) for d in held)
        answer = await binder.handle(placement_for(obj, node, shares))
        assert answer.outcome is BindingOutcome.BOUND, answer.reason
        bound.append(obj)
    await watched.until(lambda: all(watched.cluster.bound_on(b["metadata"]["uid"], node) for b in bound))
    return bound


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_victims_get_disruption_target_then_are_deleted_and_the_preemptor_is_nominated(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, proxy: FaultProxy, clock: Clock
) -> None:
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    a, b, c, d = await running_pods(kube_api, binder, watched, node, (0, 1), (2, 3), (4, 5), (6, 7))
    preemptor = pod(kube_api, "high")
    await watched.until(lambda: watched.cluster.pod(preemptor["metadata"]["uid"]) is not None)
    before, victims_before = (
        metric("topoplace_binder_preemptions_total"),
        metric("topoplace_binder_preemption_victims_total"),
    )
    proxy.log.clear()
    answer = await binder.handle(nominating(preemptor, node, a, b))
    assert answer.outcome is BindingOutcome.UNSCHEDULABLE and f"nominated to node {node}" in answer.reason
    names = {o["metadata"]["name"] for o in kube_api.store.list("pods")[0]}
    assert a["metadata"]["name"] not in names and b["metadata"]["name"] not in names
    assert c["metadata"]["name"] in names and d["metadata"]["name"] in names
    stored = kube_api.store.get("pods", preemptor["metadata"]["name"], "default")
    assert stored["status"]["nominatedNodeName"] == node
    # each victim: the condition first, then the deletion
    done = writes(proxy)
    for gone in (a, b):
        path = f"/api/v1/namespaces/default/pods/{gone['metadata']['name']}"
        assert done.index(f"PATCH {path}/status") < done.index(f"DELETE {path}")
    events = [e for e in kube_api.store.list("events")[0] if e.get("reason") == "Preempted"]
    assert {e["involvedObject"]["name"] for e in events} == {a["metadata"]["name"], b["metadata"]["name"]}
    assert metric("topoplace_binder_preemptions_total") == before + 1
    assert metric("topoplace_binder_preemption_victims_total") == victims_before + 2


async def test_a_victim_of_equal_or_higher_priority_is_never_evicted(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, proxy: FaultProxy, clock: Clock
) -> None:
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    [low] = await running_pods(kube_api, binder, watched, node, (0, 1))
    high = pod(kube_api, "high", nodeName=node)
    preemptor = pod(kube_api, "high")
    await watched.until(lambda: watched.cluster.pod(preemptor["metadata"]["uid"]) is not None)
    await watched.until(lambda: watched.cluster.pod(high["metadata"]["uid"]) is not None)
    proxy.log.clear()
    answer = await binder.handle(nominating(preemptor, node, low, high))
    assert answer.outcome is BindingOutcome.CONFLICT
    assert "not below the preemptor's 1000" in answer.reason
    assert writes(proxy) == []  # nothing written, not even the low-priority victim's eviction
    names = {o["metadata"]["name"] for o in kube_api.store.list("pods")[0]}
    assert {low["metadata"]["name"], high["metadata"]["name"]} <= names


async def test_the_freed_devices_go_to_the_preemptor_alone_even_after_a_restart(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, clock: Clock
) -> None:
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    a, b, _, _ = await running_pods(kube_api, binder, watched, node, (0, 1), (2, 3), (4, 5), (6, 7))
    preemptor = pod(kube_api, "high")
    third = pod(kube_api, "mid")
    await watched.until(lambda: watched.cluster.pod(third["metadata"]["uid"]) is not None)
    gets = devices(0, 1, 2, 3)
    await binder.handle(nominating(preemptor, node, a, b, gets=gets))
    await watched.until(lambda: watched.cluster.pod(a["metadata"]["uid"]) is None)
    await watched.until(lambda: watched.cluster.pod(preemptor["metadata"]["uid"]).nominated_node == node)  # type: ignore[union-attr]
    taken = await binder.handle(placement_for(third, node, devices(0, 1)))
    assert taken.outcome is BindingOutcome.CONFLICT and "held for pod default/" in taken.reason
    # a restarted binder knows the nomination from the cluster, and its devices once the placement comes again
    restarted = Binder(core, watched, clock)
    redelivered = await restarted.handle(nominating(preemptor, node, a, b, gets=gets))
    assert redelivered.outcome is BindingOutcome.UNSCHEDULABLE, redelivered.reason
    again = await restarted.handle(placement_for(third, node, devices(2, 3)))
    assert again.outcome is BindingOutcome.CONFLICT and "held for pod default/" in again.reason
    bound = await restarted.handle(placement_for(preemptor, node, devices(0, 1, 2, 3)))
    assert bound.outcome is BindingOutcome.BOUND, bound.reason
    assert restarted.reservations.of(preemptor["metadata"]["uid"]) is None


async def test_victims_evicted_for_a_preemptor_never_bound_count_as_wasted(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, clock: Clock
) -> None:
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    a, b = await running_pods(kube_api, binder, watched, node, (0, 1), (2, 3))
    preemptor = pod(kube_api, "high")
    third = pod(kube_api, "mid")
    await watched.until(lambda: watched.cluster.pod(third["metadata"]["uid"]) is not None)
    await binder.handle(nominating(preemptor, node, a, b, gets=devices(0, 1, 2, 3)))
    wasted = metric("topoplace_binder_wasted_preemptions_total")
    clock.now += 61.0  # the hold expires, the preemptor unbound
    taken = await binder.handle(placement_for(third, node, devices(0, 1)))
    assert taken.outcome is BindingOutcome.BOUND, taken.reason
    assert metric("topoplace_binder_wasted_preemptions_total") == wasted + 2


async def test_a_preempted_event_that_fails_once_is_written_again(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, proxy: FaultProxy, clock: Clock
) -> None:
    """The Event is the one record of why a victim went: a transient failure (or a lost reply) is retried."""
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    a, b = await running_pods(kube_api, binder, watched, node, (0, 1), (2, 3))
    preemptor = pod(kube_api, "high")
    await watched.until(lambda: watched.cluster.pod(preemptor["metadata"]["uid"]) is not None)
    proxy.fail("POST", "/namespaces/default/events", 503)
    proxy.fail("POST", "/namespaces/default/events", 500, forward_first=True)  # written, its reply lost
    answer = await binder.handle(nominating(preemptor, node, a, b))
    assert answer.outcome is BindingOutcome.UNSCHEDULABLE, answer.reason
    events = [e for e in kube_api.store.list("events")[0] if e.get("reason") == "Preempted"]
    assert sorted(e["involvedObject"]["uid"] for e in events) == sorted(p["metadata"]["uid"] for p in (a, b))


async def test_two_pods_of_equal_priority_nominated_to_one_shared_device_each_hold_only_their_own_share(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, clock: Clock
) -> None:
    """The chaos run's livelock: each preemptor's hold was the whole device its victims freed, so each
    refused the other's bind until the nominations expired. The engine's rule holds its own share alone."""
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    a, b = await running_pods(kube_api, binder, watched, node, (half(0),), (half(0),))
    first, second, peer = pod(kube_api, "high"), pod(kube_api, "high"), pod(kube_api, "high")
    lower, higher = pod(kube_api, "mid"), pod(kube_api, "top")
    for p in (first, second, peer, lower, higher):
        await watched.until(lambda p=p: watched.cluster.pod(p["metadata"]["uid"]) is not None)  # type: ignore[misc]
    for preemptor, gone in ((first, a), (second, b)):
        answer = await binder.handle(nominating(preemptor, node, gone, gets=(half(0),)))
        assert answer.outcome is BindingOutcome.UNSCHEDULABLE, answer.reason
    await watched.until(lambda: watched.cluster.pod(b["metadata"]["uid"]) is None)
    # the two nominated shares fill device 0: a third pod of lower or equal priority gets none of it ...
    for other in (lower, peer):
        refused = await binder.handle(
            placement_for(other, node, (DeviceAssignment(index=0, memory_mib=1000, cores=5),))
        )
        assert refused.outcome is BindingOutcome.CONFLICT and "held for pod default/" in refused.reason
    # ... but the devices no nominated pod gets are anyone's
    elsewhere = await binder.handle(placement_for(peer, node, devices(1)))
    assert elsewhere.outcome is BindingOutcome.BOUND, elsewhere.reason
    # each preemptor binds to its share beside the other's hold
    for preemptor in (first, second):
        bound = await binder.handle(placement_for(preemptor, node, (half(0),)))
        assert bound.outcome is BindingOutcome.BOUND, bound.reason
    assert len(binder.reservations) == 0


async def test_a_pod_of_higher_priority_is_not_held_from_a_nominated_pods_room(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, clock: Clock
) -> None:
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    [a] = await running_pods(kube_api, binder, watched, node, (0, 1))
    preemptor, higher = pod(kube_api, "high"), pod(kube_api, "top")
    await watched.until(lambda: watched.cluster.pod(higher["metadata"]["uid"]) is not None)
    await binder.handle(nominating(preemptor, node, a, gets=devices(0, 1)))
    taken = await binder.handle(placement_for(higher, node, devices(0, 1)))
    assert taken.outcome is BindingOutcome.BOUND, taken.reason


async def test_a_victim_whose_deletion_answer_was_lost_still_gets_its_preempted_event(
    kube_api: KubeApiServer, core: client.CoreV1Api, watched: WatchedCluster, proxy: FaultProxy, clock: Clock
) -> None:
    """The first DELETE is applied and its answer lost; the retry answers 404. A read confirms the pod of the
    victim's uid is gone: the lost try was the deletion, so the Event is written. A victim already gone
    before any try of ours gets none (not ours to account for)."""
    binder = Binder(core, watched, clock)
    node = new_node(kube_api, watched)
    a, b = await running_pods(kube_api, binder, watched, node, (0, 1), (2, 3))
    preemptor = pod(kube_api, "high")
    await watched.until(lambda: watched.cluster.pod(preemptor["metadata"]["uid"]) is not None)
    proxy.fail("DELETE", f"/namespaces/default/pods/{a['metadata']['name']}", 500, forward_first=True)
    proxy.before(
        "DELETE",
        f"/namespaces/default/pods/{b['metadata']['name']}",
        lambda: kube_api.store.delete("pods", b["metadata"]["name"], namespace="default"),
    )
    answer = await binder.handle(nominating(preemptor, node, a, b, gets=devices(0, 1, 2, 3)))
    assert answer.outcome is BindingOutcome.UNSCHEDULABLE, answer.reason
    assert len(proxy.calls("DELETE", f"/namespaces/default/pods/{a['metadata']['name']}")) == 2
    events = [e for e in kube_api.store.list("events")[0] if e.get("reason") == "Preempted"]
    assert [e["involvedObject"]["uid"] for e in events] == [a["metadata"]["uid"]]
