"""The demo's whole DRA pool: every object `topoplace demo` and `topoplace workload seed-cluster` create.

On the 8-GPU PCIe nodes (the DRA pool), as resource.k8s.io/v1 (Kubernetes 1.34+) speaks it:

- the first node's GPUs whole, as NVIDIA's DRA driver publishes them, except that its last GPU is
  shared by consumable capacity (KEP-5075: `allowMultipleAllocations`, a `memory` capacity whose
  requestPolicy defaults to all of it, so a claim that asks no memory still gets the GPU alone)
  and its first GPU carries a NoSchedule taint (a device health error): no claim tolerates it;
- the second node's GPUs partitionable (KEP-4815): one counter set per GPU in a slice of its own,
  consumed by the whole GPU and by each of its MIG-style partitions, so a partition and its
  whole GPU are never both given;
- a NIC driver's slice on each node, one NIC per PCIe root (`resource.kubernetes.io/pcieRoot`),
  which a claim for a GPU and a NIC on one root aligns by `matchAttribute`.

The fixture's GPUs (L40S) have no MIG: the partitions are simulated, shaped as NVIDIA's driver
publishes MIG devices (`type: mig`, `profile`, `parentUUID`).
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from schemas.topology import Device, Vendor
from topoplace.dev.demo import cluster as demo_cluster
from topoplace.dev.demo import dra

MIG_CLASS = "mig.nvidia.com"  # NVIDIA's DeviceClass of MIG devices
NIC_DRIVER = "dra.net"  # a NIC driver (DraNet's name), its DeviceClass the same
MIG_TEMPLATE = "demo-mig-1g"  # one 1g partition
SHARE_TEMPLATE = "demo-gpu-share"  # 12Gi of the shared GPU's memory
GPU_NIC_TEMPLATE = "demo-gpu-nic"  # a GPU and a NIC on one PCIe root
TEMPLATES = (dra.TEMPLATE, MIG_TEMPLATE, SHARE_TEMPLATE, GPU_NIC_TEMPLATE)
SHARED_MEMORY = "48Gi"  # an L40S's memory
SHARE_ASKS = "12Gi"
TAINT = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}  # fell off the bus
# Partition profiles: name -> (compute slices, memory slices) of a GPU's 4 + 4, and how many fit.
PROFILES: dict[str, tuple[int, int]] = {"1g.12gb": (1, 1), "2g.24gb": (2, 2)}
SLICES_PER_GPU = 4


class DraSeed(msgspec.Struct, frozen=True, kw_only=True):
    """The DRA objects to create, in order: classes, slices, claim templates."""

    device_classes: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    templates: list[dict[str, Any]]
    tainted: tuple[str, ...]  # "driver/pool/device" of every tainted device: nothing may get one
    shared: tuple[str, ...]  # the same of every device shared by consumable capacity


def dra_nodes(cluster: demo_cluster.DemoCluster) -> list[demo_cluster.DemoNode]:
    return [n for n in cluster.nodes if demo_cluster.ENFORCEMENT_POOLS.get(n.fixture) == "dra"]


def device_id(driver: str, pool: str, device: str) -> str:
    return f"{driver}/{pool}/{device}"


def _slice(name: str, driver: str, node: str, count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": driver, "pool": {"name": node, "generation": 1, "resourceSliceCount": count}, **spec},
    }


def _gpus(node: demo_cluster.DemoNode) -> tuple[Device, ...]:
    return tuple(d for d in demo_cluster.topology_of(node).devices if d.vendor is Vendor.NVIDIA)


def shared_and_tainted_slice(node: demo_cluster.DemoNode) -> dict[str, Any]:
    """The first DRA node's GPUs: the last shared by memory, the first tainted."""
    body = dra.resource_slice(node.name, _gpus(node))
    devices = body["spec"]["devices"]
    devices[0]["taints"] = [dict(TAINT)]
    shared = devices[-1]
    shared["allowMultipleAllocations"] = True
    shared["capacity"] = {
        "memory": {
            "value": SHARED_MEMORY,
            "requestPolicy": {"default": SHARED_MEMORY, "validRange": {"min": "1Gi", "step": "1Gi"}},
        }
    }
    return body


def _counter_set(gpu: Device) -> str:
    return f"{dra.device_name(gpu)}-counter-set"


def _consumes(gpu: Device, compute: int, memory: int) -> list[dict[str, Any]]:
    counters = {"compute-slices": {"value": str(compute)}, "memory-slices": {"value": str(memory)}}
    return [{"counterSet": _counter_set(gpu), "counters": counters}]


def _partitions(gpu: Device) -> list[dict[str, Any]]:
    """A GPU's MIG-style partitions, every profile as many times as its slices allow."""
    out = []
    for profile, (compute, memory) in PROFILES.items():
        for k in range(SLICES_PER_GPU // compute):
            attributes = dra.gpu_attributes(gpu) | {
                "type": {"string": "mig"},
                "uuid": {"string": f"MIG-{uuid.uuid5(uuid.NAMESPACE_URL, f'{gpu.uuid}/{profile}/{k}')}"},
                "parentUUID": {"string": gpu.uuid},
                "profile": {"string": profile},
            }
            name = f"{dra.device_name(gpu)}-mig-{profile.replace('.', '-')}-{k}"
            out.append({"name": name, "attributes": attributes, "consumesCounters": _consumes(gpu, compute, memory)})
    return out


def partitioned_slices(node: demo_cluster.DemoNode) -> list[dict[str, Any]]:
    """The second DRA node's GPUs: a slice of counter sets, a slice of whole GPUs and partitions."""
    gpus = _gpus(node)
    whole = SLICES_PER_GPU
    counter_sets = [
        {
            "name": _counter_set(g),
            "counters": {"compute-slices": {"value": str(whole)}, "memory-slices": {"value": str(whole)}},
        }
        for g in gpus
    ]
    devices = []
    for gpu in gpus:
        attributes = dra.gpu_attributes(gpu)
        devices.append(
            {"name": dra.device_name(gpu), "attributes": attributes, "consumesCounters": _consumes(gpu, whole, whole)}
        )
        devices.extend(_partitions(gpu))
    return [
        _slice(
            f"{node.name}-{dra.DRIVER}-counters",
            dra.DRIVER,
            node.name,
            2,
            nodeName=node.name,
            sharedCounters=counter_sets,
        ),
        _slice(f"{node.name}-{dra.DRIVER}", dra.DRIVER, node.name, 2, nodeName=node.name, devices=devices),
    ]


def nic_slice(node: demo_cluster.DemoNode) -> dict[str, Any]:
    """A NIC driver's slice: one RDMA NIC per PCIe root the node's GPUs hang off."""
    roots = sorted({dra.pcie_root(g.numa_node) for g in _gpus(node)})
    devices = [
        {
            "name": f"nic-{i}",
            "attributes": {
                "ifName": {"string": f"eth{i}"},
                "rdma": {"bool": True},
                dra.PCIE_ROOT: {"string": root},
            },
        }
        for i, root in enumerate(roots)
    ]
    return _slice(f"{node.name}-{NIC_DRIVER}", NIC_DRIVER, node.name, 1, nodeName=node.name, devices=devices)


def _device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device_classes() -> list[dict[str, Any]]:
    """NVIDIA's classes of whole GPUs and of MIG devices, and the NIC driver's class."""
    mig = f"device.driver == '{dra.DRIVER}' && device.attributes['{dra.DRIVER}'].type == 'mig'"
    return [
        dra.device_class(),
        _device_class(MIG_CLASS, mig),
        _device_class(NIC_DRIVER, f"device.driver == '{NIC_DRIVER}'"),
    ]


def _template(name: str, namespace: str, devices: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": devices}},
    }


def claim_templates(namespace: str) -> list[dict[str, Any]]:
    """Two whole GPUs on one root; one 1g partition; a share of a GPU's memory; a GPU and a NIC on one root."""
    profile = f"device.attributes['{dra.DRIVER}'].profile == '1g.12gb'"
    mig = {"deviceClassName": MIG_CLASS, "count": 1, "selectors": [{"cel": {"expression": profile}}]}
    share = {"deviceClassName": dra.DRIVER, "count": 1, "capacity": {"requests": {"memory": SHARE_ASKS}}}
    gpu_nic = {
        "requests": [
            {"name": "gpu", "exactly": {"deviceClassName": dra.DRIVER, "count": 1}},
            {"name": "nic", "exactly": {"deviceClassName": NIC_DRIVER, "count": 1}},
        ],
        "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": dra.PCIE_ROOT}],
    }
    return [
        dra.claim_template(dra.TEMPLATE, namespace),
        _template(MIG_TEMPLATE, namespace, {"requests": [{"name": "mig", "exactly": mig}]}),
        _template(SHARE_TEMPLATE, namespace, {"requests": [{"name": "share", "exactly": share}]}),
        _template(GPU_NIC_TEMPLATE, namespace, gpu_nic),
    ]


def seed_objects(cluster: demo_cluster.DemoCluster, namespace: str) -> DraSeed:
    """Every DRA object of the demo cluster: the first DRA node shares and taints, the second partitions."""
    nodes = dra_nodes(cluster)
    first, second = nodes[0], nodes[1]
    slices = [shared_and_tainted_slice(first), *partitioned_slices(second), *(nic_slice(n) for n in nodes)]
    slices += [dra.resource_slice(n.name, _gpus(n)) for n in nodes[2:]]
    first_gpus = shared_and_tainted_slice(first)["spec"]["devices"]
    return DraSeed(
        device_classes=device_classes(),
        slices=slices,
        templates=claim_templates(namespace),
        tainted=(device_id(dra.DRIVER, first.name, first_gpus[0]["name"]),),
        shared=(device_id(dra.DRIVER, first.name, first_gpus[-1]["name"]),),
    )
