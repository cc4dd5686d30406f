"""The demo cluster: simulated nodes of real machine types under a two-level network tree."""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.enforcement import ENFORCEMENT_LABEL
from schemas.topology import NodeTopology, Vendor
from services.collector.node.fleet import Fleet, FleetMember
from services.collector.node.topology_files import fixture_node_annotations, fixture_node_labels, load_topology
from topoplace.dev.demo import dra

# Extended resource each vendor's devices are advertised as on the Node.
DEVICE_RESOURCE: dict[Vendor, str] = {
    Vendor.NVIDIA: "nvidia.com/gpu",
    Vendor.METAX: "metax-tech.com/sgpu",
    Vendor.NEURON: "aws.amazon.com/neuron",
}
MACHINE_TYPE_LABEL = "topoplace.io/machine-type"
# A shared-GPU device plugin (HAMi's) advertises each device this many times: pods asking for a
# share count one of them (HAMi's default deviceSplitCount, and the same for MetaX sGPU).
SHARES_PER_DEVICE: dict[Vendor, int] = {Vendor.NVIDIA: 10, Vendor.METAX: 10}
NEURONCORE = "aws.amazon.com/neuroncore"
# Node pools by how they enforce a device choice (docs/binder.md): the H100 pool runs HAMi
# (labelled, since the demo has no HAMi device plugin to register), the 8-GPU PCIe pool NVIDIA's DRA
# driver (ResourceSlices, no nvidia.com/gpu extended resource); the others a plain device plugin.
ENFORCEMENT_POOLS: dict[str, str] = {"dgx-h100": "hami", "pcie-8gpu-2socket": "dra"}


class DemoNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    fixture: str  # a shipped collector fixture
    tor: str  # tier-1 hypernode


class DemoCluster(msgspec.Struct, frozen=True, kw_only=True):
    nodes: tuple[DemoNode, ...]
    spines: dict[str, tuple[str, ...]]  # tier-2 hypernode -> its tier-1 hypernodes (ToRs)


# (fixture, how many): 152 NVIDIA GPUs, 16 MetaX cards, 28 Neuron devices on 24 nodes; the first
# three ToRs hold four DGX H100 each (room for the demo's gangs).
DEFAULT_MIX: tuple[tuple[str, int], ...] = (
    ("dgx-h100", 12),
    ("dgx1-v100", 4),
    ("pcie-8gpu-2socket", 2),
    ("pcie-4gpu", 2),
    ("metax-8gpu-2zone", 2),
    ("trn1.32xlarge", 1),
    ("inf2.48xlarge", 1),
)


def default_cluster(nodes_per_tor: int = 4, tors_per_spine: int = 2) -> DemoCluster:
    names = [(fixture, f"{fixture.replace('.', '-')}-{i}") for fixture, count in DEFAULT_MIX for i in range(count)]
    nodes = tuple(
        DemoNode(name=name, fixture=fixture, tor=f"tor-{n // nodes_per_tor}") for n, (fixture, name) in enumerate(names)
    )
    tors = sorted({node.tor for node in nodes}, key=lambda t: int(t.split("-")[1]))
    spines = {
        f"spine-{s}": tuple(tors[s * tors_per_spine : (s + 1) * tors_per_spine])
        for s in range((len(tors) + tors_per_spine - 1) // tors_per_spine)
    }
    return DemoCluster(nodes=nodes, spines=spines)


def topology_of(node: DemoNode) -> NodeTopology:
    return load_topology(node.fixture, node=node.name)


def node_manifest(node: DemoNode) -> dict[str, Any]:
    """The Node object the API server gets: capacity of the fixture's devices, its labels."""
    topology = topology_of(node)
    capacity: dict[str, str] = {"cpu": "128", "memory": "1024Gi", "pods": "110"}
    dra = ENFORCEMENT_POOLS.get(node.fixture) == "dra"
    for vendor, resource in DEVICE_RESOURCE.items():
        count = sum(1 for d in topology.devices if d.vendor == vendor)
        if count and not (dra and vendor is Vendor.NVIDIA):  # a DRA driver's GPUs are no extended resource
            capacity[resource] = str(count * SHARES_PER_DEVICE.get(vendor, 1))
    cores = sum(d.cores for d in topology.devices if d.vendor == Vendor.NEURON)
    if cores:
        capacity[NEURONCORE] = str(cores)  # the Neuron device plugin advertises cores beside devices
    labels = {
        "kubernetes.io/hostname": node.name,
        MACHINE_TYPE_LABEL: topology.machine_type,
        "topoplace.io/tor": node.tor,
        **fixture_node_labels(node.fixture),
        ENFORCEMENT_LABEL: ENFORCEMENT_POOLS.get(node.fixture, "device-plugin"),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": fixture_node_annotations(node.fixture, node=node.name),
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def slice_manifests(cluster: DemoCluster) -> list[dict[str, Any]]:
    """ResourceSlices of the DRA pool's nodes, as NVIDIA's DRA driver publishes them."""
    return [
        dra.resource_slice(node.name, topology_of(node).devices)
        for node in cluster.nodes
        if ENFORCEMENT_POOLS.get(node.fixture) == "dra"
    ]


def hypernode_manifests(cluster: DemoCluster) -> list[dict[str, Any]]:
    """Volcano HyperNode objects: tier 1 = ToR (members: nodes), tier 2 = spine (members: ToRs)."""

    def hypernode(name: str, tier: int, member_type: str, members: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members],
            },
        }

    out = []
    tors: dict[str, list[str]] = {}
    for node in cluster.nodes:
        tors.setdefault(node.tor, []).append(node.name)
    for tor, members in tors.items():
        out.append(hypernode(tor, 1, "Node", members))
    for spine, spine_tors in cluster.spines.items():
        out.append(hypernode(spine, 2, "HyperNode", list(spine_tors)))
    return out


def fleet_of(cluster: DemoCluster) -> Fleet:
    """The node agents that publish the cluster's simulated nodes (`topoplace collector fleet`)."""
    return Fleet(members=tuple(FleetMember(node=n.name, source=n.fixture) for n in cluster.nodes))
