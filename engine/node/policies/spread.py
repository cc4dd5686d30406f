"""spread: emptier nodes first, between the vendor's own terms.

score = lead + fill_weight x (1 - share of the node's devices in use after the pod) + tail
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.memo import Memo
from engine.node.policy import DIGITS, NodeMeasures, around
from engine.node.vendor import NodeScore, SetChoice
from schemas.events import DeviceAssignment


class Spread:
    name = "spread"
    packs = False
    hami = True
    reads_workload = False

    def __init__(self, memo: Memo) -> None:
        """Nothing kept."""

    def score(self, measures: NodeMeasures, choice: SetChoice) -> NodeScore:
        room = measures.fill_weight * (1.0 - measures.fill_after(choice))
        return around(measures, choice, False, room, {"fill": round(room, DIGITS)})

    def device_ranks(self, measures: NodeMeasures, options: Sequence[tuple[DeviceAssignment, ...]]) -> None:
        return None


Policy = Spread
