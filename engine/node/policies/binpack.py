"""binpack: fuller nodes first (HAMi's default), between the vendor's own terms.

score = lead + fill_weight x (share of the node's devices in use after the pod) + tail
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.memo import Memo
from engine.node.policy import DIGITS, NodeMeasures, around
from engine.node.vendor import NodeScore, SetChoice
from schemas.events import DeviceAssignment


def binpack_score(measures: NodeMeasures, choice: SetChoice) -> NodeScore:
    fill = measures.fill_weight * measures.fill_after(choice)
    return around(measures, choice, True, fill, {"fill": round(fill, DIGITS)})


class Binpack:
    name = "binpack"
    packs = True
    hami = True
    reads_workload = False

    def __init__(self, memo: Memo) -> None:
        """Nothing kept."""

    def score(self, measures: NodeMeasures, choice: SetChoice) -> NodeScore:
        return binpack_score(measures, choice)

    def device_ranks(self, measures: NodeMeasures, options: Sequence[tuple[DeviceAssignment, ...]]) -> None:
        return None


Policy = Binpack
