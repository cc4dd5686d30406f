"""kube-scheduler's NodeVolumeLimits for CSI drivers (nodevolumelimits/csi.go).

A node's CSINode says how many volumes each driver may attach there (`spec.drivers[].allocatable.count`).
The volumes already attached are those of the node's pods, each counted once however many pods use it
(`NodeState.csi_volumes`); the pod's own (`VolumeRules.csi`) that are not attached already are new. The
node fails when, for a driver with a limit, attached + new > the limit: "node(s) exceed max volume count".
A driver without a limit, or a node without a CSINode, takes any number. A claim not yet bound counts as a
volume of its StorageClass's provisioner (a new one: kube's placeholder handle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemas.volumes import CsiVolume

NODE_VOLUME_LIMITS = "NodeVolumeLimits"
MAX_VOLUME_COUNT_REASON = "node(s) exceed max volume count"


def exceeds_volume_limits(
    new: Sequence[CsiVolume], attached: Sequence[CsiVolume], limits: Mapping[str, int] | None
) -> bool:
    """Whether the pod's volumes take some driver past the node's limit."""
    if not new or not limits:
        return False
    fresh = {(v.driver, v.handle) for v in new} - {(v.driver, v.handle) for v in attached}
    wanted: dict[str, int] = {}
    for driver, _ in fresh:
        wanted[driver] = wanted.get(driver, 0) + 1
    for driver, count in wanted.items():
        limit = limits.get(driver)
        if limit is not None and sum(1 for v in set(attached) if v.driver == driver) + count > limit:
            return True
    return False
