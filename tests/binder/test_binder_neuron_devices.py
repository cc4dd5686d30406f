"""A Neuron placement's devices against the Node's allocatable of the resource the pod asked.

The Neuron device plugin advertises whole devices as `aws.amazon.com/neurondevice` (its older
name `aws.amazon.com/neuron` is not always there) and NeuronCores as `aws.amazon.com/neuroncore`,
numbered per device: device i holds cores i x c .. i x c + c - 1. A trn1.32xlarge has 16 devices
of 2 NeuronCores. Through the binder's real handler, its watches and the test API server.
"""

from __future__ import annotations

from typing import Any

from binder_support import PodFactory, RecordingProducer, WatchedCluster, placement_for
from decision_keys import TEST_KEY
from kubernetes_asyncio import client
from test_binder_watch import Harness, Message

from schemas import hami, hami_neuron, topics
from schemas.enforcement import Enforcement
from schemas.events import BindingOutcome, DeviceAssignment, NodeTopologyEvent
from services.binder.apply import PodBinder
from services.binder.hami_devices import hami_annotations
from services.binder.handler import BindingSteps, PlacementHandler
from services.binder.kube_events import EventRecorder
from services.binder.ledger import DeviceLedger, Holding
from services.binder.neuron_cores import NeuronCoreBook
from services.binder.pod_reader import PodReader
from services.binder.reporting import PodReporter
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


# --- HAMi enforcement: HAMi's awsneuron annotations, which the Neuron device plugin reads --------------

NOW = 1_790_000_000.0


class HeldLow:
    """2 NeuronCores per device (trn1); `held[i]` low cores of device i held by other pods."""

    def __init__(self, held: dict[int, int]) -> None:
        self.held = held
        self.names: dict[tuple[int, str], tuple[int, ...]] = {}

    def free(self, node: str, index: int, pod_uid: str) -> tuple[int, tuple[int, ...]] | None:
        return (2, tuple(range(self.held.get(index, 0), 2))) if node == NODE else None

    def named(self, node: str, index: int, pod_uid: str, cores: tuple[int, ...]) -> None:
        self.names[(index, pod_uid)] = cores


def hami_placement(pod: dict[str, Any], devices: tuple[DeviceAssignment, ...], requests: dict[str, str]) -> Any:
    return placement_for(pod, NODE, devices, enforcement=Enforcement.HAMI, requests=requests)


def write(placement: Any, held: dict[int, int] | None = None) -> dict[str, str] | str:
    return hami_annotations(
        placement,
        lambda node, index: 32768,
        NOW,
        device_uuid=lambda node, index: None,
        neuron_cores=HeldLow(held or {}),
    )


def test_whole_devices_are_written_as_hamis_awsneuron_annotations(make_pod: PodFactory) -> None:
    notes = write(hami_placement(make_pod(), block(4, 4), {NEURONDEVICE: "4"}))
    assert isinstance(notes, dict)
    assert notes[hami_neuron.ASSIGNED_IDS] == "4,5,6,7"  # device indices
    assert (
        notes[hami_neuron.DEVICES_ALLOCATED]
        == "".join(f"{NODE}-AWSNeuron-{i},AWSNeuron,0,3:" for i in range(4, 8)) + ";"
    )
    assert notes[hami_neuron.ALLOCATED] == "false"
    assert notes[hami_neuron.ALLOC_TIME] == str(int(NOW) * 1_000_000_000)
    assert notes[hami_neuron.PREDICATE_NODE] == notes[hami.VGPU_NODE] == NODE
    assert notes[hami.BIND_PHASE] == "allocating"
    assert hami_neuron.RESOURCE_TYPE not in notes
    assert hami.DEVICES_TO_ALLOCATE not in notes  # no NVIDIA GPU list for HAMi's NVIDIA plugin


def test_neuroncores_are_written_by_core_index_above_those_other_pods_hold(make_pod: PodFactory) -> None:
    # 3 NeuronCores: the free top core of device 5 (another pod holds its core 10), then all of device 6
    devices = (DeviceAssignment(index=5, cores=1, memory_mib=16384), DeviceAssignment(index=6, cores=2))
    notes = write(hami_placement(make_pod(), devices, {CORE: "3"}), held={5: 1})
    assert isinstance(notes, dict)
    assert notes[hami_neuron.ASSIGNED_IDS] == "11,12,13"
    assert notes[hami_neuron.RESOURCE_TYPE] == CORE
    assert (
        notes[hami_neuron.DEVICES_ALLOCATED] == f"{NODE}-AWSNeuron-5,AWSNeuron,0,2:{NODE}-AWSNeuron-6,AWSNeuron,0,3:;"
    )


def test_neuroncores_hami_cannot_name_are_refused_with_the_reason(make_pod: PodFactory) -> None:
    taken = write(hami_placement(make_pod(), (DeviceAssignment(index=5, cores=2),), {CORE: "2"}), held={5: 1})
    assert taken == "device 5 on trn-a has 1 of 2 NeuronCores free, the placement asks for 2"
    unknown = hami_annotations(
        hami_placement(make_pod(), block(0, 1), {NEURON: "1"}),
        lambda node, index: None,
        NOW,
        device_uuid=lambda n, i: None,
    )
    assert isinstance(unknown, str) and "NeuronCores of device 0 on trn-a are unknown" in unknown


def annotations_of(kube_api: KubeApiServer, pod: dict[str, Any]) -> dict[str, str]:
    return dict(kube_api.store.get("pods", pod["metadata"]["name"], "default")["metadata"]["annotations"])


async def test_hami_neuron_pods_are_bound_naming_cores_no_running_pod_holds(
    core: client.CoreV1Api, kube_api: KubeApiServer, watched: WatchedCluster
) -> None:
    neuron_node(kube_api, devices=16, cores=32)
    first, second, third = (neuron_pod(kube_api, name, {CORE: "1"}) for name in ("first", "second", "third"))
    await ready(core, watched, [first, second, third])
    steps = BindingSteps(
        ledger=watched.ledger,
        binder=PodBinder(
            core, decision_key=TEST_KEY, wall_clock=lambda: NOW, neuron_cores=NeuronCoreBook(watched.ledger)
        ),
        reporter=PodReporter(EventRecorder(core, component="topoplace"), watch=watched.cluster),
        cluster=watched.cluster,
        reader=PodReader(core),
    )
    producer = RecordingProducer()
    handler = PlacementHandler(steps=steps, producer=producer)
    share = (DeviceAssignment(index=3, cores=1, memory_mib=16384),)  # one core of device 3 (cores 6 and 7)
    for pod in (first, second):
        await handler(Message(event=hami_placement(pod, share, {CORE: "1"})))
    assert [s.event.outcome for s in producer.sent] == [BindingOutcome.BOUND, BindingOutcome.BOUND]
    assert [annotations_of(kube_api, p)[hami_neuron.ASSIGNED_IDS] for p in (first, second)] == ["6", "7"]
    written = annotations_of(kube_api, second)
    assert written[hami_neuron.RESOURCE_TYPE] == CORE and written[hami_neuron.ALLOCATED] == "false"

    # The first pod ends: its core 6 is free again, while the second still runs on core 7.
    kube_api.store.delete("pods", first["metadata"]["name"], namespace="default")
    gone = first["metadata"]["uid"]
    await watched.until(lambda: gone not in watched.ledger.holders(NODE, 3))
    await handler(Message(event=hami_placement(third, share, {CORE: "1"})))
    assert producer.sent[-1].event.outcome is BindingOutcome.BOUND
    assert annotations_of(kube_api, third)[hami_neuron.ASSIGNED_IDS] == "6"


def test_a_holder_this_binder_never_named_is_taken_to_hold_the_lowest_cores() -> None:
    # A binder started after "old" was bound: it holds 1 core of device 0, named by the binder before.
    ledger = DeviceLedger(pod_gone=lambda uid: False, pod_bound_on=lambda uid, node: True)
    ledger.set_node_devices(NODE, load_topology("trn1.32xlarge", node=NODE).devices)
    ledger.hold(Holding(pod_uid="old", node=NODE, devices=(DeviceAssignment(index=0, cores=1, memory_mib=16384),)))
    book = NeuronCoreBook(ledger)
    assert book.free(NODE, 0, "new") == (2, (1,))
    assert book.free(NODE, 0, "old") == (2, (0, 1))  # a pod's own hold is not another's
    assert book.free(NODE, 99, "new") is None  # no such device in the topology
