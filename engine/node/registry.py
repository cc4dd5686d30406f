"""Which vendors an engine offers a pod, and the plugins one engine made of them.

A `VendorRegistry` names vendor packages in order and holds each package's
`Plugin` class; it is immutable and fails loudly: a package that cannot be
imported, or that exports no `Plugin`, is an error naming it (a vendor that
silently disappears would leave its pods unschedulable for no stated reason).

It also names the node policies (`policies`: the `Policy` class of each module of
`engine/node/policies/__init__.py` by default), which work for every vendor.

An engine makes its own plugins and policies from the registry (`build`,
`build_policies`), each with the engine's memo, so what they memoise belongs to that engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.limits import Limits
from engine.core.memo import Memo
from engine.core.model import PodRequest
from engine.core.node_key import NodeKeys
from engine.node.policies import NODE_POLICY_MODULES
from engine.node.policies.registry import NodePolicies
from engine.node.policy import PolicyClass
from engine.node.vendor import DeviceRequest, VendorPlugin


@dataclass(frozen=True, kw_only=True)
class VendorContext:
    """What an engine lends each of its plugins: its memo tables, its node keys, its limits, its node policies."""

    memo: Memo
    keys: NodeKeys
    limits: Limits
    policies: NodePolicies

    @classmethod
    def fresh(cls, limits: Limits | None = None) -> VendorContext:
        """A context of its own, with the registered policies (tests and tools that use a plugin without an engine)."""
        limits = limits if limits is not None else Limits()
        memo = Memo(enabled=limits.caches)
        policies = NodePolicies(load_exported(NODE_POLICY_MODULES, "Policy", "node policy"), memo)
        return cls(memo=memo, keys=NodeKeys(memo), limits=limits, policies=policies)


PluginClass = Callable[[VendorContext], VendorPlugin]


class VendorMissing(LookupError):
    """A registered vendor package (or node policy module) that cannot be imported or exports no class."""


def load_exported(modules: Sequence[str], attribute: str, what: str) -> list[Any]:
    """`attribute` of each module, in order; VendorMissing names a module that is not there or lacks it."""
    found: list[Any] = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                raise VendorMissing(f"{what} package {name!r} is registered but cannot be imported") from exc
            raise  # a real import error inside the module: surface it as it is
        exported = getattr(module, attribute, None)
        if exported is None:
            raise VendorMissing(f"{what} package {name!r} exports no {attribute} class")
        found.append(exported)
    return found


class VendorRegistry:
    """Vendor plugin classes in registration order; the first plugin whose parse_request claims a pod reads it.
    `policies`: the node policy classes (the registered ones when None)."""

    def __init__(self, plugins: Sequence[PluginClass], policies: Sequence[PolicyClass] | None = None) -> None:
        self.plugins: tuple[PluginClass, ...] = tuple(plugins)
        names = [_name(p) for p in self.plugins]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"vendor plugin {twice[0]!r} is registered twice")
        if policies is None:
            policies = load_exported(NODE_POLICY_MODULES, "Policy", "node policy")
        self.policies: tuple[PolicyClass, ...] = tuple(policies)

    @classmethod
    def of(cls, packages: Sequence[str], policy_modules: Sequence[str] = NODE_POLICY_MODULES) -> VendorRegistry:
        """The `Plugin` class of each package and the `Policy` class of each policy module, in order;
        VendorMissing names one that is not there."""
        plugins: list[PluginClass] = load_exported(packages, "Plugin", "vendor")
        return cls(plugins, load_exported(policy_modules, "Policy", "node policy"))

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

    def build_policies(self, memo: Memo) -> NodePolicies:
        """This registry's node policies, made for one engine."""
        return NodePolicies(self.policies, memo)

    def build(self, context: VendorContext) -> Vendors:
        """This registry's plugins, made for one engine."""
        return Vendors(tuple(plugin(context) for plugin in self.plugins), self.share_resources, context.policies)


def _name(plugin: PluginClass) -> str:
    return str(getattr(plugin, "name", getattr(plugin, "__name__", repr(plugin))))


class Vendors:
    """One engine's plugins, in registration order, and its node policies."""

    def __init__(
        self, plugins: tuple[VendorPlugin, ...], share_resources: frozenset[str], policies: NodePolicies
    ) -> None:
        self.plugins = plugins
        self.share_resources = share_resources
        self.policies = policies

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
