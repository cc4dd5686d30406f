"""Topology leads where the claims leave a choice: the node's NVLinks pick the pair."""

from __future__ import annotations

from dra_builders import attrs, claim, device, device_class, exact, picked, run, slice_

from engine.core.model import NodeState
from engine.node.dra.topology import link_score
from schemas.topology import Device, Link, Vendor


def _gpu(index: int) -> Device:
    return Device(index=index, uuid=f"GPU-{index}", vendor=Vendor.NVIDIA, model="H100", memory_mib=81920)


def _node() -> NodeState:
    """Four GPUs; only 2 and 3 are joined by NVLinks."""
    links = (Link(src=2, dst=3, nvlinks=12), Link(src=3, dst=2, nvlinks=12))
    return NodeState(name="node-1", machine_type="test", devices=tuple(_gpu(i) for i in range(4)), links=links)


def test_the_linked_pair_is_chosen_among_valid_allocations() -> None:
    slices = [slice_([device(f"gpu-{i}", attributes=attrs(uuid=f"GPU-{i}")) for i in range(4)])]
    first = picked(run([claim([exact("req", 2)])], slices))
    assert first == [[("req", "gpu-0"), ("req", "gpu-1")]]  # upstream: the first solution
    linked = picked(run([claim([exact("req", 2)])], slices, score=link_score(_node(), slices)))
    assert linked == [[("req", "gpu-2"), ("req", "gpu-3")]]


def test_without_the_node_agents_devices_the_first_allocation_stands() -> None:
    slices = [slice_([device(f"gpu-{i}", attributes=attrs(uuid=f"OTHER-{i}")) for i in range(4)])]
    chosen = picked(run([claim([exact("req", 2)])], slices, score=link_score(_node(), slices)))
    assert chosen == [[("req", "gpu-0"), ("req", "gpu-1")]]
    assert link_score(_node(), slices) is None  # nothing to lead: the search stops at the first solution


def test_a_gpu_and_a_nic_of_one_pcie_root_come_before_the_links() -> None:
    root = "resource.kubernetes.io/pcieRoot"
    gpus = [device(f"gpu-{i}", attributes={**attrs(uuid=f"GPU-{i}"), root: {"string": f"pci{i}"}}) for i in range(4)]
    nic = slice_([device("nic-0", attributes={root: {"string": "pci1"}})], driver="nic.example.com", pool="nics")
    slices = [slice_(gpus), nic]
    nic_class = device_class("nic", ('device.driver == "nic.example.com"',))
    requests = [exact("gpu"), exact("nic", 1, "nic")]
    classes = [device_class("gpu", ('device.driver == "gpu.example.com"',)), nic_class]
    assert picked(run([claim(requests)], slices, classes)) == [[("gpu", "gpu-0"), ("nic", "nic-0")]]  # upstream
    chosen = picked(run([claim(requests)], slices, classes, score=link_score(_node(), slices)))
    assert chosen == [[("gpu", "gpu-1"), ("nic", "nic-0")]]


def test_a_device_with_a_list_of_pcie_roots_is_aligned_with_a_device_on_any_of_them() -> None:
    root = "resource.kubernetes.io/pcieRoot"
    gpus = [device(f"gpu-{i}", attributes={**attrs(uuid=f"GPU-{i}"), root: {"string": f"pci{i}"}}) for i in range(4)]
    near = {root: {"strings": ["pci2", "pci3"]}}
    cpu = slice_([device("cpu-0", attributes=near)], driver="cpu.example.com", pool="c")
    slices = [slice_(gpus), cpu]
    classes = [
        device_class("gpu", ('device.driver == "gpu.example.com"',)),
        device_class("cpu", ('device.driver == "cpu.example.com"',)),
    ]
    requests = [exact("gpu"), exact("cpu", 1, "cpu")]
    chosen = picked(run([claim(requests)], slices, classes, score=link_score(_node(), slices)))
    assert chosen == [[("gpu", "gpu-2"), ("cpu", "cpu-0")]]
