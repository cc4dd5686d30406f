"""The registered vendors, in the order they are offered a pod.

Adding a vendor = a package here exporting `Plugin`, its plugin class (see
engine/node/vendor.py for the contract), and its name in VENDOR_PACKAGES.
`registry` is immutable: every engine makes its own plugins from it.
"""

from __future__ import annotations

from engine.node.registry import VendorRegistry

VENDOR_PACKAGES: tuple[str, ...] = (
    "engine.node.vendors.nvidia",
    "engine.node.vendors.metax",
    "engine.node.vendors.neuron",
)

registry = VendorRegistry.of(VENDOR_PACKAGES)
