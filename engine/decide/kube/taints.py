"""Taints and tolerations, matched exactly as Kubernetes does.

Sources: k8s.io/api core/v1 toleration.go (ToleratesTaint), kubernetes
pkg/apis/core/v1/helper (FindMatchingUntoleratedTaint) and the scheduler's
tainttoleration plugin (which effects filter, which score).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from schemas.kube import (
    EXISTS,
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
)

DO_NOT_SCHEDULE = frozenset({NO_SCHEDULE, NO_EXECUTE})  # the effects the TaintToleration filter reads


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Does this toleration tolerate this taint?

    An empty effect matches every effect; an empty key (only allowed with
    Exists) matches every key; Exists ignores the value; Equal (or an empty
    operator) compares it.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == EXISTS:
        return True
    return toleration.value == taint.value


def tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(tolerates(toleration, taint) for toleration in tolerations)


def first_untolerated(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    effects: Collection[str] = DO_NOT_SCHEDULE,
) -> Taint | None:
    """The node's first taint (in the node's order) with one of `effects` that no toleration tolerates."""
    for taint in taints:
        if taint.effect in effects and not tolerated(taint, tolerations):
            return taint
    return None


def count_intolerable_prefer_no_schedule(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> int:
    """How many PreferNoSchedule taints the pod does not tolerate (TaintToleration's score, lower is better)."""
    relevant = [t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not tolerated(taint, relevant))
