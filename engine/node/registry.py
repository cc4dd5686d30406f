"""Which vendors an engine offers a pod, and the plugins one engine made of them.

A `VendorRegistry` names vendor packages in order and holds each package's
`Plugin` class; it is immutable and fails loudly: a package that cannot be
imported, or that exports no `Plugin`, is an error naming it (a vendor that
silently disappears would leave its pods unschedulable for no stated reason).

An engine makes its own plugins from the registry (`build`), each with the
engine's `VendorContext`, so what a plugin memoises belongs to that engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.core.limits import Limits
from engine.core.memo import Memo
from engine.core.model import PodRequest
from engine.core.node_key import NodeKeys
from engine.node.vendor import DeviceRequest, VendorPlugin


@dataclass(frozen=True, kw_only=True)
class VendorContext:
    """What an engine lends each of its plugins: its memo tables, its node keys, its limits."""

    memo: Memo
    keys: NodeKeys
    limits: Limits

    @classmethod
    def fresh(cls, limits: Limits | None = None) -> VendorContext:
        """A context of its own (tests and tools that use a plugin without an engine)."""
        limits = limits if limits is not None else Limits()
        memo = Memo(enabled=limits.caches)
        return cls(memo=memo, keys=NodeKeys(memo), limits=limits)


PluginClass = Callable[[VendorContext], VendorPlugin]


class VendorMissing(LookupError):
    """A registered vendor package that cannot be imported or exports no plugin class."""


class VendorRegistry:
    """Vendor plugin classes in registration order; the first plugin whose parse_request claims a pod reads it."""

    def __init__(self, plugins: Sequence[PluginClass]) -> None:
        self.plugins: tuple[PluginClass, ...] = tuple(plugins)
        names = [_name(p) for p in self.plugins]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"vendor plugin {twice[0]!r} is registered twice")

    @classmethod
    def of(cls, packages: Sequence[str]) -> VendorRegistry:
        """The `Plugin` class of each package, in order; VendorMissing names a package that is not there."""
        plugins: list[PluginClass] = []
        for name in packages:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name is not None and name.startswith(exc.name):
                    raise VendorMissing(f"vendor package {name!r} is registered but cannot be imported") from exc
                raise  # a real import error inside the vendor: surface it as it is
            plugin = getattr(module, "Plugin", None)
            if plugin is None:
                raise VendorMissing(f"vendor package {name!r} exports no Plugin class")
            plugins.append(plugin)
        return cls(plugins)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(_name(p) for p in self.plugins)

    @property
    def share_resources(self) -> frozenset[str]:
        """Resources the vendors check per device that nodes do not report (HAMi's memory and core shares)."""
        return frozenset(r for p in self.plugins for r in getattr(p, "share_resources", ()))

    @property
    def node_reads(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(labels, annotations) of a node that some vendor reads: part of a node's device class."""
        labels = sorted({k for p in self.plugins for k in getattr(p, "node_labels_read", ())})
        annotations = sorted({k for p in self.plugins for k in getattr(p, "node_annotations_read", ())})
        return tuple(labels), tuple(annotations)

    def build(self, context: VendorContext) -> Vendors:
        """This registry's plugins, made for one engine."""
        return Vendors(tuple(plugin(context) for plugin in self.plugins), self.share_resources)


def _name(plugin: PluginClass) -> str:
    return str(getattr(plugin, "name", getattr(plugin, "__name__", repr(plugin))))


class Vendors:
    """One engine's plugins, in registration order."""

    def __init__(self, plugins: tuple[VendorPlugin, ...], share_resources: frozenset[str]) -> None:
        self.plugins = plugins
        self.share_resources = share_resources

    def named(self, name: str) -> VendorPlugin:
        for plugin in self.plugins:
            if plugin.name == name:
                return plugin
        raise VendorMissing(f"no vendor {name!r} (registered: {', '.join(p.name for p in self.plugins)})")

    def claim(self, request: PodRequest) -> tuple[VendorPlugin, DeviceRequest] | None:
        for plugin in self.plugins:
            parsed = plugin.parse_request(request)
            if parsed is not None:
                return plugin, parsed
        return None

    def claim_host(self, request: PodRequest) -> tuple[VendorPlugin, DeviceRequest] | None:
        """The first vendor that scores nodes for a pod asking none of its devices (see the contract)."""
        for plugin in self.plugins:
            parse = getattr(plugin, "parse_host_request", None)
            parsed = parse(request) if parse is not None else None
            if parsed is not None:
                return plugin, parsed
        return None
