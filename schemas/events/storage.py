"""Events about storage: storage.claims, storage.volumes, storage.classes, storage.csinodes (what the volume
filters read)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from schemas.events.base import Event
from schemas.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass

# --- storage.claims (compacted, key = <namespace>/<name>) -------------------------------------


class VolumeClaimEvent(Event, frozen=True, kw_only=True):
    """One PersistentVolumeClaim: its class, its request, the volume it is bound to, its selected node."""

    claim: PersistentVolumeClaim
    deleted: bool = False
    observed_at: float = 0.0


# --- storage.volumes (compacted, key = PersistentVolume name) ---------------------------------


class PersistentVolumeEvent(Event, frozen=True, kw_only=True):
    """One PersistentVolume: its class, capacity, access modes, node affinity, zone labels, claim."""

    volume: PersistentVolume
    deleted: bool = False
    observed_at: float = 0.0


# --- storage.classes (compacted, key = StorageClass name) -------------------------------------


class StorageClassEvent(Event, frozen=True, kw_only=True):
    """One StorageClass: its provisioner, binding mode and allowed topologies; whether it is marked default."""

    storage_class: StorageClass
    default: bool = False  # annotated storageclass.kubernetes.io/is-default-class: "true"
    created_at: str = ""  # creationTimestamp: the newest of several defaults is the default
    deleted: bool = False
    observed_at: float = 0.0


# --- storage.csinodes (compacted, key = node name) --------------------------------------------


class CsiNodeEvent(Event, frozen=True, kw_only=True):
    """One CSINode (named as its node): how many volumes each CSI driver may attach there (NodeVolumeLimits).

    A driver without `allocatable.count` is absent (it takes any number)."""

    node: str
    limits: dict[str, Annotated[int, msgspec.Meta(ge=0)]] = {}
    deleted: bool = False
    observed_at: float = 0.0
