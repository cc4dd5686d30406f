"""A Neuron node known only from its Node object takes pods asking the Neuron device plugin's resources.

The node has no node agent: the cluster watcher reads its devices from the Node (today's device
plugin advertises `aws.amazon.com/neurondevice` and `aws.amazon.com/neuroncore`, not the older
`aws.amazon.com/neuron`) and publishes them; the placer places a pod asking `neurondevice` on an
aligned block of the trn1.32xlarge, one asking `neuroncore` on one device's cores; the binder checks
each against the Node's allocatable of what the pod asked, and binds. Real services, the embedded
broker, the test API server.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2e_checks import pod_state
from e2e_cluster import NAMESPACE, pods_by_uid
from e2e_pipeline import Pipeline

from schemas.events import BindingOutcome
from topoplace.dev.kubeapi import resources as kube_resources

pytestmark = pytest.mark.e2e

NODE = "e2e-trn1-0"  # the same name in every run: the topics outlive a test
NEURONDEVICE = "aws.amazon.com/neurondevice"
CORE = "aws.amazon.com/neuroncore"


def trn1_node() -> dict[str, Any]:
    """A trn1.32xlarge as EKS and the current Neuron device plugin describe it: 16 devices, 32 NeuronCores."""
    resources = {"cpu": "128", "memory": "512Gi", "pods": "110", NEURONDEVICE: "16", CORE: "32"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": {"node.kubernetes.io/instance-type": "trn1.32xlarge"}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def neuron_pod(name: str, requests: dict[str, str]) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "registry.invalid/e2e:latest",
        "resources": {"requests": requests, "limits": requests},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "topoplace-e2e"}},
        "spec": {"schedulerName": "topoplace", "containers": [container]},
    }


async def test_pods_asking_neurondevice_and_neuroncore_are_bound_on_a_node_read_from_its_node_object(
    pipeline: Pipeline, run_id: str
) -> None:
    store = pipeline.kube_api.store
    store.create(kube_resources.NODES, trn1_node())
    await pipeline.start_all()

    whole = store.create(
        kube_resources.PODS, neuron_pod(f"{run_id}-neurondevice", {NEURONDEVICE: "4"}), namespace=NAMESPACE
    )
    cores = store.create(kube_resources.PODS, neuron_pod(f"{run_id}-neuroncore", {CORE: "1"}), namespace=NAMESPACE)
    uids = [str(whole["metadata"]["uid"]), str(cores["metadata"]["uid"])]
    await pipeline.wait_bound(uids, timeout=60.0)

    for uid in uids:
        bound = pipeline.outcomes.bound(uid)
        assert bound is not None and bound.event.outcome is BindingOutcome.BOUND and bound.event.node == NODE
    pods = pods_by_uid(store)
    block = pod_state(pods[uids[0]])
    assert block.node == NODE
    indices = [d.index for d in block.devices]
    assert len(indices) == 4 and indices[0] % 4 == 0 and indices == list(range(indices[0], indices[0] + 4))
    assert all(d.cores == 2 for d in block.devices)  # whole devices: both NeuronCores of each
    core = pod_state(pods[uids[1]])
    assert core.node == NODE and [d.cores for d in core.devices] == [1]
    assert core.devices[0].index not in indices
