"""The registered vendors, in the order they are offered a pod.

Adding a vendor = a package here exporting `plugin` (see engine/node/vendor.py for
the contract) and its name in VENDOR_MODULES.
"""

from __future__ import annotations

import importlib

from engine.node.vendor import VendorRegistry

VENDOR_MODULES: tuple[str, ...] = (
    "engine.node.vendors.nvidia",
    "engine.node.vendors.metax",
    "engine.node.vendors.neuron",
)


def build_registry(modules: tuple[str, ...] = VENDOR_MODULES) -> VendorRegistry:
    registry = VendorRegistry()
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real import error inside the vendor: surface it
                raise
            continue
        registry.register(module.plugin)
    return registry


registry = build_registry()
