"""Topology leads where the claims leave a choice: a score of allocated devices from the node's links; pure.

A slice device is joined with the node agent's device by its UUID (the `uuid`
attribute of the driver's domain, as NVIDIA's DRA driver publishes it). The score of
a set is the sum of its pairs' link scores (NVLinks and PCIe path, as the engine
scores GPU pairs); devices the node agent does not know add nothing, so without
topology every set scores 0 and the first valid allocation stands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import combinations

from engine.core.model import NodeState
from engine.node.dra.model import DeviceId, ResourceSlice
from engine.node.vendors.nvidia.links import pair_score
from schemas.topology import Device

UUID_ATTRIBUTE = "uuid"


def _uuid_of(driver: str, attributes: dict[str, object]) -> str | None:
    for name in (UUID_ATTRIBUTE, f"{driver}/{UUID_ATTRIBUTE}"):
        found = attributes.get(name)
        text = getattr(found, "string", None)
        if isinstance(text, str):
            return text
    return None


def link_score(node: NodeState, slices: Iterable[ResourceSlice]) -> Callable[[list[DeviceId]], float]:
    """The score hook for `allocate`: the pair-score sum of the node's devices among those chosen."""
    by_uuid = {d.uuid: d for d in node.devices}
    links = {(link.src, link.dst): link for link in node.links}
    joined: dict[DeviceId, Device] = {}
    for s in slices:
        for device in s.spec.devices:
            uuid = _uuid_of(s.spec.driver, dict(device.attributes))
            if uuid is not None and uuid in by_uuid:
                joined[(s.spec.driver, s.spec.pool.name, device.name)] = by_uuid[uuid]

    def score(chosen: list[DeviceId]) -> float:
        known = [joined[d] for d in chosen if d in joined]
        return float(sum(pair_score(a, b, links).score for a, b in combinations(known, 2)))

    return score
