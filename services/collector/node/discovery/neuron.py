"""AWS Neuron nodes (Trainium, Inferentia2), read as HAMi's `awsneuron` device reads them.

The Neuron device plugin advertises the node's devices in `status.capacity`:
`aws.amazon.com/neurondevice` (`aws.amazon.com/neuron` from older plugins) and
`aws.amazon.com/neuroncore`. The instance type label says which machine it is: a shipped
fixture of that type (trn1.32xlarge's 4x4 NeuronLink torus, inf2.48xlarge's ring) gives the
links, and its device count must be the plugin's. Another instance type of a known family gets
the family's devices without links: which devices a smaller instance links is not published.
"""

from __future__ import annotations

import msgspec

from schemas.topology import Device, NodeTopology, Vendor
from schemas.vendors import NEURON, descriptor
from services.collector.node.discovery.node import DiscoveryError, NodeObject, VendorDiscovery, source_prefix
from services.collector.node.topo_matrix import synthetic_uuid
from services.collector.node.topology_files import JSON_FIXTURES, load_topology

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
DEVICE_RESOURCES = NEURON.whole_names  # neurondevice, then the older neuron (schemas/vendors.py)
CORE_RESOURCE = NEURON.cores  # neuroncore


class NeuronFamily(msgspec.Struct, frozen=True, kw_only=True):
    """One device of an instance family (the AWS Neuron documentation's architecture pages)."""

    model: str
    memory_mib: int
    cores: int  # NeuronCores per device


FAMILIES: dict[str, NeuronFamily] = {
    "trn1": NeuronFamily(model="Trainium", memory_mib=32 * 1024, cores=2),
    "trn1n": NeuronFamily(model="Trainium", memory_mib=32 * 1024, cores=2),
    "inf2": NeuronFamily(model="Inferentia2", memory_mib=32 * 1024, cores=2),
}


def carries(node: NodeObject) -> bool:
    return any(node.count(resource) > 0 for resource in (*DEVICE_RESOURCES, CORE_RESOURCE))


def read(node: NodeObject) -> NodeTopology:
    instance_type = node.labels.get(INSTANCE_TYPE, "")
    if not instance_type:
        raise DiscoveryError(
            f"node {node.name}: metadata.labels[{INSTANCE_TYPE}]: missing; a Neuron node's links depend on it"
        )
    resource, devices = next(((r, node.count(r)) for r in DEVICE_RESOURCES if node.count(r) > 0), ("", 0))
    if not devices:
        raise DiscoveryError(
            f"node {node.name}: status.capacity: {CORE_RESOURCE} without {' or '.join(DEVICE_RESOURCES)}"
        )
    cores = node.count(CORE_RESOURCE)
    if cores % devices:
        raise DiscoveryError(f"node {node.name}: status.capacity[{CORE_RESOURCE}]: {cores} for {devices} devices")
    if instance_type in JSON_FIXTURES:
        return _from_fixture(node, instance_type, resource, devices, cores)
    family = FAMILIES.get(instance_type.split(".")[0])
    if family is None:
        known = ", ".join(sorted(FAMILIES))
        raise DiscoveryError(
            f"node {node.name}: metadata.labels[{INSTANCE_TYPE}]: {instance_type!r} is no known Neuron family ({known})"
        )
    per_device = cores // devices if cores else family.cores
    prefix = descriptor(Vendor.NEURON).uuid_prefix
    return NodeTopology(
        node=node.name,
        machine_type=instance_type,
        devices=tuple(
            Device(
                index=i,
                uuid=synthetic_uuid(prefix, node.name, instance_type, i),
                vendor=Vendor.NEURON,
                model=family.model,
                memory_mib=family.memory_mib,
                cores=per_device,
            )
            for i in range(devices)
        ),
        source=f"{source_prefix(node.name)}{resource} {devices} on a {instance_type} (links not published for it)",
    )


def _from_fixture(node: NodeObject, instance_type: str, resource: str, devices: int, cores: int) -> NodeTopology:
    topology = load_topology(instance_type, node=node.name)
    if len(topology.devices) != devices:
        raise DiscoveryError(
            f"node {node.name}: status.capacity[{resource}]: {devices} devices, but a {instance_type} has "
            f"{len(topology.devices)}"
        )
    expected = sum(d.cores for d in topology.devices)
    if cores and cores != expected:
        raise DiscoveryError(
            f"node {node.name}: status.capacity[{CORE_RESOURCE}]: {cores} NeuronCores, but a {instance_type} has "
            f"{expected}"
        )
    source = f"{source_prefix(node.name)}{resource} {devices} on a {instance_type}; links from {topology.source}"
    return msgspec.structs.replace(topology, source=source)


DISCOVERY = VendorDiscovery(name="neuron", carries=carries, read=read)
