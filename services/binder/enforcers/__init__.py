"""The enforcement paths of the binder, one module each, and their registry (one line per path).

A new path: a module here with an `Enforcer` (see base.py for the hooks), a line in
`ENFORCERS` under its `Enforcement` value (schemas/enforcement.py), and, when it needs a
setting or a client of its own, a field of `BinderParts`. `Enforcers` refuses to start
when a value of `Enforcement` has no line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from schemas.enforcement import Enforcement
from schemas.events import PlacementEvent
from services.binder.enforcers import dra, hami, plain
from services.binder.enforcers.base import BinderParts, Enforcer

EnforcerFactory = Callable[[BinderParts], Enforcer]

ENFORCERS: Mapping[Enforcement, EnforcerFactory] = {
    Enforcement.DEVICE_PLUGIN: plain.PlainDevicePlugin,
    Enforcement.HAMI: hami.HamiEnforcer,
    Enforcement.DRA: dra.DraEnforcer,
}


class Enforcers:
    """One enforcer per path, built once per binder (they keep state: HAMi's node turns, releases)."""

    def __init__(self, parts: BinderParts, registry: Mapping[Enforcement, EnforcerFactory] = ENFORCERS) -> None:
        missing = [path.value for path in Enforcement if path not in registry]
        if missing:
            raise ValueError(f"no enforcer for enforcement {', '.join(missing)}: add it to {__name__}.ENFORCERS")
        self._all = tuple(make(parts) for make in registry.values())

    def for_placement(self, placement: PlacementEvent) -> tuple[Enforcer, ...]:
        """The paths with work for the placement, in the registry's order."""
        return tuple(enforcer for enforcer in self._all if enforcer.applies(placement))

    async def drain(self) -> None:
        """Wait for every path's background work."""
        for enforcer in self._all:
            await enforcer.drain()
