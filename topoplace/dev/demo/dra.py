"""The demo's DRA pool: ResourceSlices as NVIDIA's DRA driver publishes them, and a claim template.

Shared with the end-to-end tests, which build the same objects for their own cluster.
"""

from __future__ import annotations

from typing import Any

from schemas.topology import Device, Vendor

DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver, and the DeviceClass its GPUs belong to
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
TEMPLATE = "demo-two-gpus"  # the demo's claim template: two GPUs on one PCIe root


def pcie_root(numa_node: int | None) -> str:
    # The fixtures carry NUMA nodes, not PCIe roots: one root per NUMA node stands in for them.
    return f"pci{numa_node or 0:04x}:00"


def device_name(device: Device) -> str:
    return f"gpu-{device.index}"


def gpu_attributes(device: Device) -> dict[str, Any]:
    """The attributes NVIDIA's DRA driver sets on a whole GPU."""
    attributes: dict[str, Any] = {
        "type": {"string": "gpu"},
        "uuid": {"string": device.uuid},
        "productName": {"string": device.model},
        "index": {"int": device.index},
        PCIE_ROOT: {"string": pcie_root(device.numa_node)},
    }
    if device.numa_node is not None:
        attributes["resource.kubernetes.io/numaNode"] = {"int": device.numa_node}
    return attributes


def resource_slice(node: str, devices: tuple[Device, ...]) -> dict[str, Any]:
    """One node's GPUs as a ResourceSlice (pool = the node), with the attributes the driver sets."""
    published = [
        {"name": device_name(d), "attributes": gpu_attributes(d)} for d in devices if d.vendor is Vendor.NVIDIA
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        # One slice per pool, generation 1: a real API server refuses a pool without a slice count.
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": published,
        },
    }


def device_class() -> dict[str, Any]:
    """The DeviceClass NVIDIA's DRA driver installs: its whole GPUs (the slices' `type: gpu`)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {
            "selectors": [
                {"cel": {"expression": f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"}}
            ]
        },
    }


def claim_template(name: str, namespace: str, *, count: int = 2, model: str = "") -> dict[str, Any]:
    """A ResourceClaimTemplate asking for `count` GPUs on one PCIe root (of `model`, when given)."""
    exactly: dict[str, Any] = {"deviceClassName": DRIVER, "count": count}
    if model:
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].productName == "{model}"'}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpus", "exactly": exactly}],
                    "constraints": [{"requests": ["gpus"], "matchAttribute": PCIE_ROOT}],
                }
            }
        },
    }
