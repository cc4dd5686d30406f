"""Mode hami's node score for every policy HAMi knows (pkg/scheduler/policy/node_policy.go).

HAMi scores a node by its usage before the pod; binpack takes the highest, spread
the lowest. Reported higher-is-better: usage under a packing policy, the vendor's
`hami_spread_base` - usage under a spreading one (NVIDIA: 30 - usage, others: -usage),
around the vendor's own HAMi terms (MetaX's topology score).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.node.policy import DIGITS, NodeMeasures, NodePolicy, around
from engine.node.vendor import NodeScore, SetChoice
from schemas.events import DeviceAssignment


class HamiUsage:
    """A policy HAMi knows, as mode hami scores it."""

    hami = True
    reads_workload = False

    def __init__(self, policy: NodePolicy) -> None:
        self.name = policy.name
        self.packs = policy.packs

    def score(self, measures: NodeMeasures, choice: SetChoice) -> NodeScore:
        usage = measures.hami_usage()
        term = usage if self.packs else measures.hami_spread_base - usage
        return around(measures, choice, self.packs, term, {"hami_usage": round(usage, DIGITS)})

    def device_ranks(self, measures: NodeMeasures, options: Sequence[tuple[DeviceAssignment, ...]]) -> None:
        return None
