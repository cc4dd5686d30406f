"""The binder decides nothing on trust: forged placements against the test API server, through the
handler and the binder's own watch. A refused placement writes nothing to the API server."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest
from binder_support import FaultProxy, RecordingProducer, WatchedCluster, gpus, placement_for
from kubernetes_asyncio import client
from opentelemetry import context as otel_context
from prometheus_client import REGISTRY

from schemas.events import BindingEvent, BindingOutcome, DeviceAssignment, PlacementEvent
from services.binder.apply import PodBinder
from services.binder.cluster_view import ClusterView
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.kube_objects import NodeObject
from services.binder.pod_reader import PodReader
from topoplace.dev.kubeapi import KubeApiServer

CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context = msgspec.field(default_factory=otel_context.Context)


class Reporter:
    """What the handler would tell the pod (the Event writes are tested with the API server elsewhere)."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def scheduled(self, placement: PlacementEvent) -> None:
        self.told.append("Scheduled")

    def failed_scheduling(self, placement: PlacementEvent, message: str) -> None:
        self.told.append(message)

    def unschedulable(self, placement: PlacementEvent, message: str) -> None:
        self.told.append(message)


async def handle(
    core: client.CoreV1Api, watched: WatchedCluster, placement: PlacementEvent, cluster: ClusterView | None = None
) -> BindingEvent:
    producer = RecordingProducer()
    steps = BindingSteps(
        ledger=watched.ledger,
        binder=PodBinder(core),
        reporter=Reporter(),
        cluster=cluster or watched.cluster,
        reader=PodReader(core),
    )
    await PlacementHandler(steps=steps, producer=producer)(Message(event=placement))
    event = producer.sent[-1].event
    assert isinstance(event, BindingEvent)
    return event


def writes(proxy: FaultProxy) -> list[str]:
    return [f"{s.method} {s.path}" for s in proxy.log if s.method != "GET"]


def refusals(kind: str) -> float:
    return REGISTRY.get_sample_value("topoplace_binder_refusals_total", {"kind": kind}) or 0.0


def new_node(kube_api: KubeApiServer, watched: WatchedCluster, spec: dict[str, Any] | None = None, **meta: Any) -> str:
    name = f"node-{uuid.uuid4().hex[:8]}"
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    status: dict[str, Any] = {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}
    status.update(meta.pop("status", {}))
    kube_api.store.create("nodes", {"metadata": {"name": name, **meta}, "spec": spec or {}, "status": status})
    watched.ledger.set_node_devices(name, gpus(8))
    return name


def new_pod(kube_api: KubeApiServer, **spec: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": f"pod-{uuid.uuid4().hex[:8]}", "namespace": "default"},
        "spec": {"schedulerName": "topoplace", "containers": [{"name": "c", "image": "i"}], **spec},
    }
    return kube_api.store.create("pods", body, namespace="default")


async def seen(watched: WatchedCluster, pod: dict[str, Any], node: str) -> None:
    uid = pod["metadata"]["uid"]
    await watched.until(lambda: watched.cluster.pod(uid) is not None and watched.cluster.node_rules(node) is not None)


async def test_a_forged_placement_of_another_schedulers_pod_onto_a_control_plane_node_writes_nothing(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, watched: WatchedCluster
) -> None:
    node = new_node(kube_api, watched, {"taints": [CONTROL_PLANE_TAINT]})
    pod = new_pod(kube_api, schedulerName="default-scheduler")
    await seen(watched, pod, node)
    before = refusals("other_scheduler")
    outcome = await handle(core, watched, placement_for(pod, node))
    assert outcome.outcome is BindingOutcome.FAILED
    assert (
        outcome.reason == f"pod default/{pod['metadata']['name']} names scheduler 'default-scheduler', not 'topoplace'"
    )
    assert writes(proxy) == []
    assert "nodeName" not in kube_api.store.get("pods", pod["metadata"]["name"], "default")["spec"]
    assert watched.ledger.holding(pod["metadata"]["uid"]) is None
    assert refusals("other_scheduler") == before + 1


async def test_a_pod_the_watch_has_not_seen_is_read_and_checked_all_the_same(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, watched: WatchedCluster
) -> None:
    node = new_node(kube_api, watched)
    lagging = ClusterView()  # listed before the pod was created, and no event since
    lagging.replace_pods([])
    lagging.replace_nodes([msgspec.convert(kube_api.store.get("nodes", node), type=NodeObject)])
    pod = new_pod(kube_api, schedulerName="default-scheduler")
    outcome = await handle(core, watched, placement_for(pod, node), lagging)
    assert outcome.outcome is BindingOutcome.FAILED and "'default-scheduler'" in outcome.reason
    assert [s.method for s in proxy.log] == ["GET"]  # asked, never bound on the placement's word


@pytest.mark.parametrize(
    ("node_spec", "node_meta", "pod_spec", "kind", "reason"),
    [
        (
            {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]},
            {},
            {},
            "taint",
            "node(s) had untolerated taint {dedicated: infra}",
        ),
        (
            {"taints": [{"key": "gpu-broken", "effect": "NoExecute"}]},
            {},
            {"tolerations": [{"key": "gpu-broken", "operator": "Exists", "effect": "NoSchedule"}]},
            "taint",
            "node(s) had untolerated taint {gpu-broken: }",
        ),
        ({"unschedulable": True}, {}, {}, "node_unschedulable", "node(s) were unschedulable"),
        (
            {},
            {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
            {},
            "node_not_ready",
            "node(s) were not ready",
        ),
        (
            {},
            {"labels": {"zone": "a"}},
            {"nodeSelector": {"zone": "b"}},
            "node_affinity",
            "node(s) didn't match Pod's node affinity/selector",
        ),
        (
            {},
            {"labels": {"gpu": "a100"}},
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}
                            ]
                        }
                    }
                }
            },
            "node_affinity",
            "node(s) didn't match Pod's node affinity/selector",
        ),
    ],
)
async def test_a_node_the_pod_may_not_go_to_is_refused_in_kube_schedulers_words(
    core: client.CoreV1Api,
    kube_api: KubeApiServer,
    proxy: FaultProxy,
    watched: WatchedCluster,
    node_spec: dict[str, Any],
    node_meta: dict[str, Any],
    pod_spec: dict[str, Any],
    kind: str,
    reason: str,
) -> None:
    node = new_node(kube_api, watched, node_spec, **node_meta)
    pod = new_pod(kube_api, **pod_spec)
    await seen(watched, pod, node)
    before = refusals(kind)
    outcome = await handle(core, watched, placement_for(pod, node))
    assert (outcome.outcome, outcome.reason) == (BindingOutcome.CONFLICT, reason)
    assert writes(proxy) == []
    assert refusals(kind) == before + 1


async def test_a_pod_that_tolerates_the_nodes_taints_and_cordon_is_bound(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, watched: WatchedCluster
) -> None:
    node = new_node(kube_api, watched, {"unschedulable": True, "taints": [CONTROL_PLANE_TAINT]}, labels={"zone": "a"})
    tolerations = [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    pod = new_pod(kube_api, tolerations=tolerations, nodeSelector={"zone": "a"})
    await seen(watched, pod, node)
    outcome = await handle(core, watched, placement_for(pod, node))
    assert outcome.outcome is BindingOutcome.BOUND, outcome.reason


async def test_a_free_index_named_with_a_held_devices_uuid_is_refused(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, watched: WatchedCluster
) -> None:
    node = new_node(kube_api, watched)
    holder, squatter = new_pod(kube_api), new_pod(kube_api)
    await seen(watched, holder, node)
    await seen(watched, squatter, node)
    held = await handle(core, watched, placement_for(holder, node, (DeviceAssignment(index=0, uuid="GPU-0"),)))
    assert held.outcome is BindingOutcome.BOUND
    before = refusals("device_identity")
    forged = placement_for(squatter, node, (DeviceAssignment(index=1, uuid="GPU-0"),))
    outcome = await handle(core, watched, forged)
    assert (outcome.outcome, outcome.reason) == (
        BindingOutcome.CONFLICT,
        f"device 1 on node {node} is GPU-1, not GPU-0",
    )
    assert [w for w in writes(proxy) if squatter["metadata"]["name"] in w] == []
    assert refusals("device_identity") == before + 1


async def test_a_topology_giving_one_uuid_to_two_indices_is_refused(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, watched: WatchedCluster
) -> None:
    node = new_node(kube_api, watched)
    twins = tuple(msgspec.structs.replace(d, uuid="GPU-0") if d.index == 1 else d for d in gpus(8))
    watched.ledger.set_node_devices(node, twins)
    pod = new_pod(kube_api)
    await seen(watched, pod, node)
    outcome = await handle(core, watched, placement_for(pod, node, (DeviceAssignment(index=1),)))
    assert (outcome.outcome, outcome.reason) == (
        BindingOutcome.CONFLICT,
        f"node {node}'s topology gives one UUID GPU-0 to devices 0, 1",
    )
    assert writes(proxy) == []
