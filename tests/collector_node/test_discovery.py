"""Devices read from the Node object as each vendor's device plugin publishes them (HAMi's way)."""

from __future__ import annotations

import msgspec
import pytest

from schemas import topics
from schemas.topology import Vendor
from services.collector.node.agent import topology_event
from services.collector.node.discovery import VENDORS, DiscoveryError, NodeObject, discover
from services.collector.node.topology_files import fixture_node_annotations, load_topology
from topoplace.event_checks import check_event

TYPE = "node.kubernetes.io/instance-type"


def neuron_node(instance_type: str | None, **capacity: str) -> NodeObject:
    labels = {TYPE: instance_type} if instance_type else {}
    return NodeObject(name="n1", labels=labels, capacity={f"aws.amazon.com/{k}": v for k, v in capacity.items()})


class Found(msgspec.Struct, frozen=True, kw_only=True):
    vendor: Vendor
    machine_type: str
    devices: int
    cores: int  # per device
    links_of: str | None  # the fixture whose links it has; None: no links


FOUND = {
    "trn1.32xlarge: the 4x4 torus": (
        neuron_node("trn1.32xlarge", neurondevice="16", neuroncore="32"),
        Found(vendor=Vendor.NEURON, machine_type="trn1.32xlarge", devices=16, cores=2, links_of="trn1.32xlarge"),
    ),
    "an older plugin's resource name": (
        neuron_node("trn1.32xlarge", neuron="16"),
        Found(vendor=Vendor.NEURON, machine_type="trn1.32xlarge", devices=16, cores=2, links_of="trn1.32xlarge"),
    ),
    "inf2.48xlarge: the ring": (
        neuron_node("inf2.48xlarge", neurondevice="12", neuroncore="24"),
        Found(vendor=Vendor.NEURON, machine_type="inf2.48xlarge", devices=12, cores=2, links_of="inf2.48xlarge"),
    ),
    "trn1.2xlarge: one device, no links": (
        neuron_node("trn1.2xlarge", neurondevice="1", neuroncore="2"),
        Found(vendor=Vendor.NEURON, machine_type="trn1.2xlarge", devices=1, cores=2, links_of=None),
    ),
    "inf2.24xlarge: its family's devices, links not published": (
        neuron_node("inf2.24xlarge", neurondevice="6"),
        Found(vendor=Vendor.NEURON, machine_type="inf2.24xlarge", devices=6, cores=2, links_of=None),
    ),
    "MetaX whole GPUs: the count only": (
        NodeObject(name="n1", capacity={"metax-tech.com/gpu": "8"}),
        Found(vendor=Vendor.METAX, machine_type="metax-8gpu", devices=8, cores=100, links_of=None),
    ),
}  # fmt: skip


@pytest.mark.parametrize(("node", "found"), FOUND.values(), ids=FOUND.keys())
def test_a_vendors_node_is_read_from_its_device_plugins_resources(node: NodeObject, found: Found) -> None:
    topology = discover(node)
    assert topology is not None
    assert (topology.machine_type, len(topology.devices)) == (found.machine_type, found.devices)
    assert all(d.vendor is found.vendor and d.cores == found.cores for d in topology.devices)
    expected_links = load_topology(found.links_of).links if found.links_of else ()
    assert topology.links == expected_links
    assert len({d.uuid for d in topology.devices}) == found.devices
    assert topology.source.startswith("Node n1: ")
    check_event(topics.TOPOLOGY_NODES.name, "n1", topology_event(topology, 1.0))  # publishable as it is


def test_metax_cards_keep_their_zones_numa_and_uuids_from_the_plugins_annotation() -> None:
    annotations = fixture_node_annotations("metax-8gpu-2zone", node="n1")
    topology = discover(NodeObject(name="n1", annotations=annotations, capacity={"metax-tech.com/sgpu": "128"}))
    fixture = load_topology("metax-8gpu-2zone", node="n1")
    assert topology is not None
    assert [(d.uuid, d.link_zone, d.memory_mib, d.model) for d in topology.devices] == [
        (d.uuid, d.link_zone, d.memory_mib, d.model) for d in fixture.devices
    ]
    check_event(topics.TOPOLOGY_NODES.name, "n1", topology_event(topology, 1.0))


def test_a_node_of_no_such_vendor_is_none() -> None:
    nvidia = NodeObject(name="n1", labels={TYPE: "p5.48xlarge"}, capacity={"nvidia.com/gpu": "8", "cpu": "192"})
    assert discover(nvidia) is None


REFUSED = {
    "no instance type": (neuron_node(None, neurondevice="16"), "metadata.labels[node.kubernetes.io/instance-type]"),
    "fewer devices than the type has": (
        neuron_node("trn1.32xlarge", neurondevice="12"),
        "status.capacity[aws.amazon.com/neurondevice]: 12 devices, but a trn1.32xlarge has 16",
    ),
    "cores that do not add up": (
        neuron_node("trn1.32xlarge", neurondevice="16", neuroncore="48"),
        "status.capacity[aws.amazon.com/neuroncore]: 48 NeuronCores, but a trn1.32xlarge has 32",
    ),
    "cores not a multiple of the devices": (
        neuron_node("inf2.24xlarge", neurondevice="6", neuroncore="7"),
        "status.capacity[aws.amazon.com/neuroncore]: 7 for 6 devices",
    ),
    "an unknown family": (neuron_node("p5.48xlarge", neuron="2"), "'p5.48xlarge' is no known Neuron family"),
    "cores without devices": (neuron_node("trn1.32xlarge", neuroncore="32"), "aws.amazon.com/neuroncore without"),
    "a count that is not one": (neuron_node("trn1.32xlarge", neurondevice="16k"), "not a count: '16k'"),
    "a MetaX list that is not JSON": (
        NodeObject(name="n1", annotations={"metax-tech.com/node-gpu-devices": "[{"}),
        "metadata.annotations[metax-tech.com/node-gpu-devices]",
    ),
    "a MetaX card without a uuid": (
        NodeObject(name="n1", annotations={"metax-tech.com/node-gpu-devices": '[{"uuid": ""}]'}),
        "every card needs a uuid of its own",
    ),
    "MetaX shares without the list": (
        NodeObject(name="n1", capacity={"metax-tech.com/sgpu": "16"}),
        "without the annotation metax-tech.com/node-gpu-devices",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("node", "names"), REFUSED.values(), ids=REFUSED.keys())
def test_what_cannot_be_read_is_refused_naming_the_field(node: NodeObject, names: str) -> None:
    with pytest.raises(DiscoveryError, match="^node n1: ") as refused:
        discover(node)
    assert names in str(refused.value)


def test_every_vendor_but_nvidia_has_one_discovery() -> None:
    # NVIDIA is read on the node by NVML; every other vendor the engine supports, from its Node.
    assert sorted(v.name for v in VENDORS) == sorted(v.value for v in Vendor if v is not Vendor.NVIDIA)
