"""Storage objects (core/v1 PersistentVolumeClaims and PersistentVolumes, storage.k8s.io/v1 StorageClasses and
CSINodes) -> storage.claims, storage.volumes, storage.classes, storage.csinodes: pure functions and their
trackers, no I/O.

Each object is read by the decoding `engine place --cluster` uses too (topoplace/kube_storage.py), reduced
to what kube-scheduler's volume filters read (schemas/volumes.py). A field that cannot be read is a
Problem and the object goes out without it, on the side that fits fewer pods: a claim's request
unreadable asks nothing more of a volume than its class and modes, a volume's capacity unreadable is 0
(no claim binds it), a class's allowed topologies unreadable leave it no provisioner, a CSINode's driver
with a negative count is left out (no limit: kube's API server refuses such a CSINode anyway).
"""

from __future__ import annotations

import msgspec

from schemas import topics
from schemas.events import CsiNodeEvent, PersistentVolumeEvent, StorageClassEvent, VolumeClaimEvent
from services.collector.cluster.trackers import KeyedTracker, Publication
from services.collector.cluster.translate import Problem
from topoplace import kube_storage as ks
from topoplace.kube_storage import ClaimObject, CsiNodeObject, StorageClassObject, VolumeObject


def claim_key(obj: ClaimObject) -> str:
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def claim_event(obj: ClaimObject, now: float) -> tuple[VolumeClaimEvent, list[Problem]]:
    try:
        return VolumeClaimEvent(claim=ks.claim_of(obj), observed_at=now), []
    except ks.StorageFieldError as exc:
        problem = Problem(object=claim_key(obj), field=exc.field, reason=exc.reason)
        spec = msgspec.structs.replace(obj.spec, resources=ks.StorageRequests())
        claim = ks.claim_of(msgspec.structs.replace(obj, spec=spec))
        return VolumeClaimEvent(claim=claim, observed_at=now), [problem]


def volume_event(obj: VolumeObject, now: float) -> tuple[PersistentVolumeEvent, list[Problem]]:
    try:
        return PersistentVolumeEvent(volume=ks.volume_of(obj), observed_at=now), []
    except ks.StorageFieldError as exc:
        problem = Problem(object=obj.metadata.name, field=exc.field, reason=exc.reason)
        spec = msgspec.structs.replace(obj.spec, capacity={})
        volume = ks.volume_of(msgspec.structs.replace(obj, spec=spec))
        return PersistentVolumeEvent(volume=volume, observed_at=now), [problem]


def class_event(obj: StorageClassObject, now: float) -> tuple[StorageClassEvent, list[Problem]]:
    problems: list[Problem] = []
    try:
        storage_class = ks.storage_class_of(obj)
    except ks.StorageFieldError as exc:
        problems.append(Problem(object=obj.metadata.name, field=exc.field, reason=exc.reason))
        storage_class = ks.storage_class_of(msgspec.structs.replace(obj, provisioner="", allowed_topologies=()))
    event = StorageClassEvent(
        storage_class=storage_class,
        default=ks.is_default_class(obj),
        created_at=obj.metadata.creation_timestamp or "",
        observed_at=now,
    )
    return event, problems


def csi_node_event(obj: CsiNodeObject, now: float) -> tuple[CsiNodeEvent, list[Problem]]:
    problems: list[Problem] = []
    drivers = []
    for i, driver in enumerate(obj.spec.drivers):
        count = driver.allocatable.count if driver.allocatable is not None else None
        if count is not None and count < 0:
            field = f"spec.drivers[{i}].allocatable.count"
            problems.append(Problem(object=obj.metadata.name, field=field, reason="must not be negative"))
            continue
        drivers.append(driver)
    readable = msgspec.structs.replace(obj, spec=ks.CsiNodeSpec(drivers=tuple(drivers)))
    return CsiNodeEvent(node=obj.metadata.name, limits=ks.csi_limits_of(readable), observed_at=now), problems


def claim_tracker() -> KeyedTracker[ClaimObject, VolumeClaimEvent]:
    """Every claim by <namespace>/<name>; a claim deleted is a deleted event, then a tombstone."""

    def on_gone(key: str, last: VolumeClaimEvent, now: float) -> list[Publication]:
        return _deleted(topics.STORAGE_CLAIMS, key, msgspec.structs.replace(last, deleted=True, observed_at=now))

    return KeyedTracker(claim_event, claim_key, on_gone, topics.STORAGE_CLAIMS.name)


def volume_tracker() -> KeyedTracker[VolumeObject, PersistentVolumeEvent]:
    def on_gone(key: str, last: PersistentVolumeEvent, now: float) -> list[Publication]:
        return _deleted(topics.STORAGE_VOLUMES, key, msgspec.structs.replace(last, deleted=True, observed_at=now))

    return KeyedTracker(volume_event, lambda v: v.metadata.name, on_gone, topics.STORAGE_VOLUMES.name)


def class_tracker() -> KeyedTracker[StorageClassObject, StorageClassEvent]:
    def on_gone(key: str, last: StorageClassEvent, now: float) -> list[Publication]:
        return _deleted(topics.STORAGE_CLASSES, key, msgspec.structs.replace(last, deleted=True, observed_at=now))

    return KeyedTracker(class_event, lambda c: c.metadata.name, on_gone, topics.STORAGE_CLASSES.name)


def csi_node_tracker() -> KeyedTracker[CsiNodeObject, CsiNodeEvent]:
    def on_gone(key: str, last: CsiNodeEvent, now: float) -> list[Publication]:
        return _deleted(topics.STORAGE_CSINODES, key, msgspec.structs.replace(last, deleted=True, observed_at=now))

    return KeyedTracker(csi_node_event, lambda c: c.metadata.name, on_gone, topics.STORAGE_CSINODES.name)


def _deleted(
    topic: topics.Topic,
    key: str,
    deleted: VolumeClaimEvent | PersistentVolumeEvent | StorageClassEvent | CsiNodeEvent,
) -> list[Publication]:
    """The deleted event tells live readers; the tombstone lets compaction drop the key."""
    return [Publication(topic=topic.name, key=key, event=deleted), Publication(topic=topic.name, key=key, event=None)]
