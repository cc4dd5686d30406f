"""A placement's device indices against what the Node object advertises (pure).

A node agent's `topology.nodes` may list more devices than the kubelet
advertises (a failed GPU the device plugin dropped, a forged or stale event).
The API server's Node is the truth: a device index at or beyond the Node's
allocatable count of that vendor's resource is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from schemas.events import DeviceAssignment
from schemas.quantity import QuantityError, value
from schemas.topology import Vendor
from schemas.vendors import DESCRIPTORS

# The extended resources each vendor's device plugin advertises, whole devices first (schemas/vendors.py).
# (HAMi advertises `nvidia.com/gpu` times its split count: a larger count, so never a false refusal.)
VENDOR_RESOURCES: dict[Vendor, tuple[str, ...]] = {d.vendor: d.advertised for d in DESCRIPTORS}
ALL_DEVICE_RESOURCES = tuple(r for resources in VENDOR_RESOURCES.values() for r in resources)


def device_index_problem(
    node: str,
    devices: tuple[DeviceAssignment, ...],
    allocatable: Mapping[str, str] | None,
    vendor_of: Callable[[int], Vendor | None],
) -> str | None:
    """Why these device indices cannot be on this node, or None when the Node has them all.

    `allocatable` None: there is no Node object of that name. `vendor_of(index)`: the
    vendor of the node's device from its published topology (None when unknown: then
    any device resource the Node advertises counts).
    """
    if not devices:
        return None
    if allocatable is None:
        return f"node {node} has no Node object in the cluster"
    for share in devices:
        vendor = vendor_of(share.index)
        names = VENDOR_RESOURCES[vendor] if vendor is not None else ALL_DEVICE_RESOURCES
        counts = [(name, _count(allocatable[name])) for name in names if name in allocatable]
        if not counts:
            return f"node {node} advertises no {' or '.join(names)} in its allocatable"
        name, count = max(counts, key=lambda c: c[1]) if vendor is None else counts[0]
        if share.index >= count:
            return (
                f"node {node} advertises {count} {name}, so it has no device {share.index} "
                "(its published topology lists more devices than its Node object)"
            )
    return None


def _count(quantity: str) -> int:
    try:
        return value(quantity)
    except QuantityError:
        return 0
