"""What an event of the state topics freed or changed, for the parked pods' hints (parking.Growth).

kube-scheduler's queueing hints, in topoplace's words: an event wakes only the parked pods whose
RetryHint it could help (a pod that mounts claims by a storage change, a pod held by pod affinity by a
pod that came or left, ...).
"""

from __future__ import annotations

from schemas import topics
from schemas.events import (
    BindingEvent,
    CsiNodeEvent,
    DeviceUsageEvent,
    Event,
    PersistentVolumeEvent,
    PodLifecycleEvent,
    ResourceSliceEvent,
    StorageClassEvent,
    VolumeClaimEvent,
)
from services.placer.parking import Growth
from services.placer.view import ViewChange

_NODE_TOPICS = frozenset(
    t.name for t in (topics.TOPOLOGY_NODES, topics.NODES_STATUS, topics.TOPOLOGY_NETWORK, topics.TOPOLOGY_LEVELS)
)

_STORAGE_TOPICS = frozenset(
    t.name for t in (topics.STORAGE_CLAIMS, topics.STORAGE_VOLUMES, topics.STORAGE_CLASSES, topics.STORAGE_CSINODES)
)


def event_growth(event: Event, change: ViewChange) -> Growth:
    """What the event freed or changed, for the parked pods' hints (kube-scheduler's queueing hints)."""
    if isinstance(event, DeviceUsageEvent):
        return Growth.DEVICES  # a device healthy again
    if isinstance(event, ResourceSliceEvent):
        return Growth.CLAIMS
    if isinstance(event, VolumeClaimEvent | PersistentVolumeEvent | StorageClassEvent | CsiNodeEvent):
        return Growth.VOLUMES
    if isinstance(event, PodLifecycleEvent | BindingEvent):  # a pod left a node, or a decision was dropped
        return _pod_growth(change)
    return Growth.NODES  # node topology or status, HyperNodes, topology levels


def tombstone_growth(topic: str, change: ViewChange) -> Growth:
    """What a tombstone on `topic` (the object deleted) freed or changed, for the parked pods' hints."""
    if topic in _NODE_TOPICS:
        return Growth.NODES
    if topic == topics.USAGE_DEVICES.name:
        return Growth.DEVICES
    if topic == topics.RESOURCE_SLICES.name:
        return Growth.CLAIMS
    if topic in _STORAGE_TOPICS:
        return Growth.VOLUMES
    return _pod_growth(change)


def _pod_growth(change: ViewChange) -> Growth:
    """A pod that left frees its host resources (and devices, and a ReadWriteOncePod claim); one that came,
    left or changed may let a pod held by pod affinity or spread in (a pod that only came frees nothing else)."""
    growth = Growth.PODS if change.pods_moved else Growth.NONE
    if change.reported:
        growth |= Growth.REPORTED
    if change.capacity_grew or change.dropped:
        growth |= Growth.HOST | Growth.VOLUMES | (Growth.DEVICES if change.devices_freed else Growth.NONE)
    return growth
