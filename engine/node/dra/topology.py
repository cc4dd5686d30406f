"""Topology leads where the claims leave a choice: a score of allocated devices from the node's links; pure.

A slice device is joined with the node agent's device by its UUID (the `uuid`
attribute of the driver's domain, as NVIDIA's DRA driver publishes it). The score of
a set is the sum of its pairs' link scores (NVLinks and PCIe path, as the engine
scores GPU pairs); devices the node agent does not know add nothing. Ahead of the links,
each pair of devices of different drivers on one PCIe root (`resource.kubernetes.io/pcieRoot`:
a GPU and its NIC; a list attribute, as KEP-5491 lets a CPU publish its roots: sharing one)
counts PCIE_ALIGNED. Without topology or roots every set scores 0 and the
first valid allocation stands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import combinations

from engine.core.model import NodeState
from engine.node.dra.constraints import AttributeValues, attribute_values
from engine.node.dra.model import DeviceId, ResourceSlice
from engine.node.vendors.nvidia.links import pair_score
from schemas.topology import Device

UUID_ATTRIBUTE = "uuid"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCIE_ALIGNED = 1_000_000.0  # above any sum of link scores: alignment leads, links break ties


def _uuid_of(driver: str, attributes: dict[str, object]) -> str | None:
    for name in (UUID_ATTRIBUTE, f"{driver}/{UUID_ATTRIBUTE}"):
        found = attributes.get(name)
        text = getattr(found, "string", None)
        if isinstance(text, str):
            return text
    return None


def link_score(node: NodeState, slices: Iterable[ResourceSlice]) -> Callable[[list[DeviceId]], float] | None:
    """The score hook for `allocate`: the pair-score sum of the node's devices among those chosen.
    None when no device of the slices is known to the node agent nor has a PCIe root: every set
    would score the same, so the first solution stands without searching on (as upstream)."""
    by_uuid = {d.uuid: d for d in node.devices}
    links = {(link.src, link.dst): link for link in node.links}
    joined: dict[DeviceId, Device] = {}
    roots: dict[DeviceId, AttributeValues] = {}
    for s in slices:
        for device in s.spec.devices:
            key = (s.spec.driver, s.spec.pool.name, device.name)
            uuid = _uuid_of(s.spec.driver, dict(device.attributes))
            if uuid is not None and uuid in by_uuid:
                joined[key] = by_uuid[uuid]
            root = device.attributes.get(PCIE_ROOT)
            values = attribute_values(root) if root is not None else None
            if values:
                roots[key] = values

    if not joined and not roots:
        return None

    def score(chosen: list[DeviceId]) -> float:
        known = [joined[d] for d in chosen if d in joined]
        linked = float(sum(pair_score(a, b, links).score for a, b in combinations(known, 2)))
        rooted = [d for d in chosen if d in roots]
        aligned = sum(1 for a, b in combinations(rooted, 2) if a[0] != b[0] and not roots[a].isdisjoint(roots[b]))
        return aligned * PCIE_ALIGNED + linked

    return score
