"""The placer's storage: claims, volumes and classes from the storage topics, and the claims running pods use.

Fed by storage.claims, storage.volumes, storage.classes (and the pods.lifecycle events of pods on nodes,
for the claims they mount), it answers one pending pod's volume rules (`rules_for`: kube-scheduler's
VolumeBinding / VolumeRestrictions / VolumeZone PreFilter, engine.decide.kube.volumes.resolve_volumes).
The catalog the engine reads is rebuilt only after a storage event changed it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from engine.decide.kube.volumes import resolve_volumes
from schemas.events import (
    LifecyclePhase,
    PendingPodEvent,
    PersistentVolumeEvent,
    PodLifecycleEvent,
    StorageClassEvent,
    VolumeClaimEvent,
)
from schemas.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeCatalog, VolumeRules
from topoplace.kube_storage import default_class

V = TypeVar("V")


class StorageView:
    """Every PersistentVolumeClaim, PersistentVolume and StorageClass known, as the engine's VolumeCatalog."""

    def __init__(self, holds: Callable[[str], bool] = lambda uid: False) -> None:
        """`holds(uid)`: the pod holds a placement now (assumed or bound), as the pod ledger says."""
        self._holds = holds
        self._decided: dict[str, tuple[str, ...]] = {}  # pod uid -> claims of a pod placed, not yet seen bound
        self._claims: dict[str, PersistentVolumeClaim] = {}  # by namespace/name
        self._volumes: dict[str, PersistentVolume] = {}
        self._classes: dict[str, StorageClassEvent] = {}
        self._pod_claims: dict[str, tuple[str, ...]] = {}  # pod uid -> namespace/name of the claims it mounts
        self._catalog: VolumeCatalog | None = None  # None: to rebuild

    # --- the storage topics: True when what pods may bind changed ---

    def apply_claim(self, event: VolumeClaimEvent) -> bool:
        return self._put(self._claims, event.claim.key, None if event.deleted else event.claim)

    def claim_gone(self, key: str) -> bool:
        return self._put(self._claims, key, None)

    def apply_volume(self, event: PersistentVolumeEvent) -> bool:
        return self._put(self._volumes, event.volume.name, None if event.deleted else event.volume)

    def volume_gone(self, name: str) -> bool:
        return self._put(self._volumes, name, None)

    def apply_class(self, event: StorageClassEvent) -> bool:
        # when it was seen is no change
        kept = None if event.deleted else msgspec.structs.replace(event, observed_at=0.0)
        return self._put(self._classes, event.storage_class.name, kept)

    def class_gone(self, name: str) -> bool:
        return self._put(self._classes, name, None)

    def _put(self, table: dict[str, V], key: str, value: V | None) -> bool:
        before = table.get(key)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        changed = before != value
        if changed:
            self._catalog = None
        return changed

    # --- pods on nodes: the claims they use (ReadWriteOncePod) ---

    def decided(self, pending: PendingPodEvent) -> None:
        """The pod was placed (assumed): its claims count as in use until the cluster reports it."""
        if pending.volume_claims:
            self._decided[pending.uid] = tuple(f"{pending.namespace}/{name}" for name in pending.volume_claims)

    def apply_lifecycle(self, event: PodLifecycleEvent) -> None:
        self._decided.pop(event.uid, None)  # bound (its own claims now) or deleted
        before = self._pod_claims.get(event.uid, ())
        if event.phase is LifecyclePhase.BOUND and event.volume_claims:
            after = tuple(f"{event.namespace}/{name}" for name in event.volume_claims)
            self._pod_claims[event.uid] = after
        else:
            after = ()
            self._pod_claims.pop(event.uid, None)
        if before != after:
            self._catalog = None

    # --- what the engine reads ---

    def catalog(self) -> VolumeCatalog:
        if self._catalog is None:
            classes: dict[str, StorageClass] = {n: e.storage_class for n, e in self._classes.items()}
            defaults = ((e.created_at, n) for n, e in self._classes.items() if e.default)
            in_use = frozenset(key for keys in self._pod_claims.values() for key in keys)
            self._catalog = VolumeCatalog(
                claims=dict(self._claims),
                volumes=dict(self._volumes),
                classes=classes,
                default_class=default_class(defaults),
                claims_in_use=in_use,
            )
        return self._catalog

    def rules_for(self, pending: PendingPodEvent) -> VolumeRules | None:
        """The pod's claims resolved against the cluster; None for a pod that mounts none."""
        if not pending.volume_claims:
            return None
        catalog = self.catalog()
        # ReadWriteOncePod: a claim of a pod placed but not yet bound is in use too (kube counts assumed pods)
        stale = [uid for uid in self._decided if not self._holds(uid)]  # its decision was dropped
        for uid in stale:
            del self._decided[uid]
        assumed = {key for uid, keys in self._decided.items() if uid != pending.uid for key in keys}
        if assumed - catalog.claims_in_use:
            catalog = msgspec.structs.replace(catalog, claims_in_use=catalog.claims_in_use | assumed)
        return resolve_volumes(pending.namespace, pending.volume_claims, catalog)
