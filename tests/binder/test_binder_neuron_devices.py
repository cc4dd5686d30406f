"""A Neuron placement's devices against the Node's allocatable of the resource the pod asked.

The Neuron device plugin advertises whole devices as `aws.amazon.com/neurondevice` (its older
name `aws.amazon.com/neuron` is not always there) and NeuronCores as `aws.amazon.com/neuroncore`,
numbered per device: device i holds cores i x c .. i x c + c - 1. A trn1.32xlarge has 16 devices
of 2 NeuronCores. Through the binder's real handler, its watches and the test API server.
"""

from __future__ import annotations

from typing import Any

from binder_support import WatchedCluster, placement_for
from kubernetes_asyncio import client
from test_binder_watch import Harness

from schemas import topics
from schemas.events import BindingOutcome, DeviceAssignment, NodeTopologyEvent
from services.collector.node.topology_files import load_topology
from topoplace.dev.kubeapi import KubeApiServer

NODE = "trn-a"
NEURONDEVICE = "aws.amazon.com/neurondevice"
NEURON = "aws.amazon.com/neuron"
CORE = "aws.amazon.com/neuroncore"


def neuron_node(kube_api: KubeApiServer, devices: int, cores: int) -> None:
    """A Node of today's Neuron device plugin: neurondevice and neuroncore, no `neuron`."""
    allocatable = {"cpu": "128", "memory": "512Gi", "pods": "110", NEURONDEVICE: str(devices), CORE: str(cores)}
    labels = {"node.kubernetes.io/instance-type": "trn1.32xlarge"}
    body = {
        "metadata": {"name": NODE, "labels": labels},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }
    kube_api.store.create("nodes", body)


def neuron_pod(kube_api: KubeApiServer, name: str, requests: dict[str, str]) -> dict[str, Any]:
    resources = {"requests": requests, "limits": requests}
    container = {"name": "main", "image": "busybox", "resources": resources}
    body = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "topoplace", "containers": [container]},
    }
    return kube_api.store.create("pods", body, namespace="default")


async def ready(core: client.CoreV1Api, watched: WatchedCluster, pods: list[dict[str, Any]]) -> Harness:
    """The trn1.32xlarge topology published for the node, and the node and pods seen by the watch."""
    topology = load_topology("trn1.32xlarge", node=NODE)
    event = NodeTopologyEvent(node=NODE, machine_type=topology.machine_type, devices=topology.devices)
    watched.ledger.apply_message(topics.TOPOLOGY_NODES.name, NODE, event)
    uids = [p["metadata"]["uid"] for p in pods]
    await watched.until(
        lambda: watched.cluster.allocatable(NODE) is not None and all(watched.cluster.pod(u) for u in uids)
    )
    return Harness(core, watched)


def block(start: int, count: int, cores: int = 2) -> tuple[DeviceAssignment, ...]:
    return tuple(DeviceAssignment(index=i, cores=cores) for i in range(start, start + count))


async def test_neurondevice_and_neuroncore_pods_are_bound_on_a_node_without_the_older_name(
    core: client.CoreV1Api, kube_api: KubeApiServer, watched: WatchedCluster
) -> None:
    neuron_node(kube_api, devices=16, cores=32)
    whole = neuron_pod(kube_api, "whole", {NEURONDEVICE: "4"})
    cores = neuron_pod(kube_api, "cores", {CORE: "1"})
    harness = await ready(core, watched, [whole, cores])

    bound = await harness.handle(placement_for(whole, NODE, block(0, 4)))
    assert bound.outcome is BindingOutcome.BOUND, bound.reason
    one_core = await harness.handle(
        placement_for(cores, NODE, (DeviceAssignment(index=15, cores=1, memory_mib=16384),))
    )
    assert one_core.outcome is BindingOutcome.BOUND, one_core.reason


async def test_indices_beyond_the_asked_resources_allocatable_are_refused_naming_it(
    core: client.CoreV1Api, kube_api: KubeApiServer, watched: WatchedCluster
) -> None:
    # The published topology lists 16 devices; the kubelet advertises 4 devices, 8 NeuronCores.
    neuron_node(kube_api, devices=4, cores=8)
    whole = neuron_pod(kube_api, "whole", {NEURONDEVICE: "1"})
    cores = neuron_pod(kube_api, "cores", {CORE: "2"})
    older = neuron_pod(kube_api, "older", {NEURON: "1"})
    within = neuron_pod(kube_api, "within", {CORE: "2"})
    harness = await ready(core, watched, [whole, cores, older, within])

    refused = await harness.handle(placement_for(whole, NODE, block(5, 1)))
    assert refused.outcome is BindingOutcome.CONFLICT
    assert f"advertises 4 {NEURONDEVICE}, so it has no device 5" in refused.reason
    refused = await harness.handle(placement_for(cores, NODE, block(4, 1)))
    assert refused.outcome is BindingOutcome.CONFLICT
    assert f"advertises 8 {CORE}, so it has no device 4 of 2" in refused.reason
    # The kubelet grants only what the Node advertises: the older name is not there.
    refused = await harness.handle(placement_for(older, NODE, block(0, 1)))
    assert refused.outcome is BindingOutcome.CONFLICT
    assert f"advertises no {NEURON}" in refused.reason

    bound = await harness.handle(placement_for(within, NODE, block(3, 1)))
    assert bound.outcome is BindingOutcome.BOUND, bound.reason
