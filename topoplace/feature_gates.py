"""Feature gates, as Kubernetes components take them: `Name=true,Other=false`.

One reader for both ways they are given: `topoplace engine place --cluster --feature-gates` and
the placer's TOPOPLACE_FEATURE_GATES (topoplace/config.py). topoplace reads two families, each by
its upstream name and with its upstream default where none is given:

- DRA's (DRAAdminAccess, DRAPrioritizedList, DRAListTypeAttributes, ...): the structured
  allocator's `Features` (engine/node/dra), defaulting to the newest Kubernetes release's;
- Kueue's TASBalancedPlacement (off by default, as in Kueue): a Kueue gang's balanced placement.

The engine and the schemas are imported only when the gates are used, so reading the settings (and
building the CLI's parser, which names them) stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from engine.node.dra import Features


def parse_feature_gates(text: str | None) -> dict[str, bool]:
    """`Name=true,Other=false` as kube-scheduler's --feature-gates reads it; ValueError names the bad part."""
    gates: dict[str, bool] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, value = part.strip().partition("=")
        if not sep or not name.strip() or value.strip().lower() not in ("true", "false"):
            raise ValueError(f"expected Name=true or Name=false, got {part.strip()!r}")
        gates[name.strip()] = value.strip().lower() == "true"
    return gates


def dra_gates() -> tuple[str, ...]:
    """The DRA feature gates the allocator reads (DRAAdminAccess, DRAPrioritizedList, ...)."""
    from engine.node.dra import Features

    return tuple(Features.__struct_fields__)


def kueue_gates() -> tuple[str, ...]:
    """Kueue's feature gates a Kueue gang reads (TASBalancedPlacement)."""
    from schemas.gangs import KUEUE_BALANCED_PLACEMENT

    return (KUEUE_BALANCED_PLACEMENT,)


def known_gates(text: str | None) -> dict[str, bool]:
    """The gates in `text`, each one topoplace reads; ValueError names a gate it does not know (a typo
    would otherwise leave the gate at its default without a word)."""
    gates = parse_feature_gates(text)
    if not gates:
        return gates
    known = (*dra_gates(), *kueue_gates())
    unknown = sorted(set(gates) - set(known))
    if unknown:
        raise ValueError(f"unknown feature gate(s) {', '.join(unknown)}: topoplace reads {', '.join(sorted(known))}")
    return gates


class FeatureGates(msgspec.Struct, frozen=True, kw_only=True):
    """The gates set, by name; those not set keep their upstream default."""

    gates: Mapping[str, bool] = {}

    def dra_features(self) -> Features:
        """The allocator's features: the DRA gates given, the others as in the newest release."""
        from engine.node.dra import Features

        return Features(**{g: v for g, v in self.gates.items() if g in dra_gates()})

    def kueue(self) -> dict[str, bool]:
        """Kueue's gates given (as Kueue's Configuration `featureGates` would set them)."""
        return {g: v for g, v in self.gates.items() if g in kueue_gates()}

    @property
    def kueue_balanced_placement(self) -> bool:
        (balanced,) = kueue_gates()
        return self.gates.get(balanced, False)
