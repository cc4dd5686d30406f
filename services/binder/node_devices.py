"""A placement's device indices against what the Node object advertises (pure).

A node agent's `topology.nodes` may list more devices than the kubelet
advertises (a failed GPU the device plugin dropped, a forged or stale event).
The API server's Node is the truth: a device index at or beyond the Node's
allocatable count of the resource the pod asked is refused.

Which count: the vendor's whole-device resource the pod asked (`aws.amazon.com/neurondevice`
or the older `aws.amazon.com/neuron`: the one the kubelet will grant); NeuronCores when the
pod asked those (device i holds cores i x c .. i x c + c - 1, as the Neuron device plugin and
HAMi number them, so the Node must advertise (i + 1) x c); otherwise, as before, the first
whole-device resource of the vendor the Node advertises (schemas/vendors.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from schemas.events import DeviceAssignment
from schemas.quantity import QuantityError, value
from schemas.topology import Vendor
from schemas.vendors import DESCRIPTORS, descriptor
from services.binder.ledger import DeviceCapacity

# The extended resources each vendor's device plugin advertises, whole devices first (schemas/vendors.py).
# (HAMi advertises `nvidia.com/gpu` times its split count: a larger count, so never a false refusal.)
VENDOR_RESOURCES: dict[Vendor, tuple[str, ...]] = {d.vendor: d.advertised for d in DESCRIPTORS}
ALL_DEVICE_RESOURCES = tuple(r for resources in VENDOR_RESOURCES.values() for r in resources)


def device_index_problem(
    node: str,
    devices: tuple[DeviceAssignment, ...],
    allocatable: Mapping[str, str] | None,
    device_of: Callable[[int], DeviceCapacity | None],
    asked: Collection[str] = (),
) -> str | None:
    """Why these device indices cannot be on this node, or None when the Node has them all.

    `allocatable` None: there is no Node object of that name. `device_of(index)`: the node's
    device from its published topology (None when unknown: then any device resource the Node
    advertises counts). `asked`: the resources the pod requests (a positive amount).
    """
    if not devices:
        return None
    if allocatable is None:
        return f"node {node} has no Node object in the cluster"
    for share in devices:
        device = device_of(share.index)
        vendor = device.vendor if device is not None else None
        if vendor is None:
            problem = _whole_problem(node, share.index, allocatable, ALL_DEVICE_RESOURCES, largest=True)
        else:
            problem = _vendor_problem(node, share.index, allocatable, vendor, device, asked)
        if problem is not None:
            return problem
    return None


def _vendor_problem(
    node: str,
    index: int,
    allocatable: Mapping[str, str],
    vendor: Vendor,
    device: DeviceCapacity | None,
    asked: Collection[str],
) -> str | None:
    found = descriptor(vendor)
    named = [name for name in found.whole_names if name in asked]
    if named:
        return _whole_problem(node, index, allocatable, (named[0],), largest=False)
    if found.cores and found.cores in asked and device is not None and device.cores > 0:
        return _core_problem(node, index, allocatable, found.cores, device.cores)
    return _whole_problem(node, index, allocatable, found.advertised, largest=False)


def _whole_problem(
    node: str, index: int, allocatable: Mapping[str, str], names: tuple[str, ...], *, largest: bool
) -> str | None:
    counts = [(name, _count(allocatable[name])) for name in names if name in allocatable]
    if not counts:
        return f"node {node} advertises no {' or '.join(names)} in its allocatable"
    name, count = max(counts, key=lambda c: c[1]) if largest else counts[0]
    if index >= count:
        return (
            f"node {node} advertises {count} {name}, so it has no device {index} "
            "(its published topology lists more devices than its Node object)"
        )
    return None


def _core_problem(node: str, index: int, allocatable: Mapping[str, str], name: str, per_device: int) -> str | None:
    if name not in allocatable:
        return f"node {node} advertises no {name} in its allocatable"
    count = _count(allocatable[name])
    if (index + 1) * per_device > count:
        return (
            f"node {node} advertises {count} {name}, so it has no device {index} of {per_device} "
            "(its published topology lists more devices than its Node object)"
        )
    return None


def _count(quantity: str) -> int:
    try:
        return value(quantity)
    except QuantityError:
        return 0
