"""Feature gates as kube-scheduler's and Kueue's --feature-gates name them: which the engine reads
(the DRA allocator's, Kueue's TASBalancedPlacement), and the text `Name=true,Other=false`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.node.dra import Features


def parse_feature_gates(text: str | None) -> dict[str, bool]:
    """`Name=true,Other=false` as kube-scheduler's --feature-gates reads it; ValueError names the bad part."""
    gates: dict[str, bool] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, value = part.strip().partition("=")
        if not sep or not name or value.lower() not in ("true", "false"):
            raise ValueError(f"--feature-gates: expected Name=true or Name=false, got {part.strip()!r}")
        gates[name] = value.lower() == "true"
    return gates


def dra_gates() -> tuple[str, ...]:
    """The DRA feature gates the allocator reads (DRAAdminAccess, DRAPrioritizedList, ...)."""
    from engine.node.dra import Features

    return tuple(Features.__struct_fields__)


def kueue_gates() -> tuple[str, ...]:
    """Kueue's feature gates a Kueue gang reads (TASBalancedPlacement)."""
    from schemas.gangs import KUEUE_BALANCED_PLACEMENT

    return (KUEUE_BALANCED_PLACEMENT,)


def dra_features(gates: dict[str, bool]) -> Features:
    """The allocator's features: the DRA gates given, the others as in the newest release."""
    from engine.node.dra import Features

    return Features(**{g: v for g, v in gates.items() if g in dra_gates()})
