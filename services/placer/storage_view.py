"""The placer's storage: claims, volumes and classes from the storage topics, and the claims running pods use.

Fed by storage.claims, storage.volumes, storage.classes (and the pods.lifecycle events of pods on nodes,
for the claims they mount), it answers one pending pod's volume rules (`rules_for`: kube-scheduler's
VolumeBinding / VolumeRestrictions / VolumeZone PreFilter, engine.decide.kube.volumes.resolve_volumes).
The catalog the engine reads is rebuilt only after a storage event changed it.

For NodeVolumeLimits it keeps each node's CSINode limits (storage.csinodes) and answers the CSI volumes
attached to a node (`attached`): those of the claims its pods mount, bound or placed by this replica and
not yet bound (kube counts assumed pods), each volume once (volume_mounts.py). A storage change notes
the nodes whose attached volumes it may change (`take_touched`), so only those are rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from engine.decide.kube.volumes import csi_volumes, resolve_volumes
from schemas.events import (
    CsiNodeEvent,
    LifecyclePhase,
    PendingPodEvent,
    PersistentVolumeEvent,
    PodLifecycleEvent,
    StorageClassEvent,
    VolumeClaimEvent,
)
from schemas.volumes import CsiVolume, PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeCatalog, VolumeRules
from services.placer.volume_mounts import Mounted, VolumeMounts
from topoplace.kube_storage import default_class

V = TypeVar("V")


class StorageView:
    """Every PersistentVolumeClaim, PersistentVolume and StorageClass known, as the engine's VolumeCatalog."""

    def __init__(self, holds: Callable[[str], bool] = lambda uid: False) -> None:
        """`holds(uid)`: the pod holds a placement now (assumed or bound), as the pod ledger says."""
        self._holds = holds
        self._claims: dict[str, PersistentVolumeClaim] = {}  # by namespace/name
        self._volumes: dict[str, PersistentVolume] = {}
        self._classes: dict[str, StorageClassEvent] = {}
        self._mounts = VolumeMounts()  # the claims pods mount, bound or placed, by node and by claim
        self._claim_of_volume: dict[str, str] = {}  # PersistentVolume name -> the claim bound to it
        self._csi_limits: dict[str, dict[str, int]] = {}  # node -> CSI driver -> volumes it may attach
        self._touched: set[str] = set()  # nodes whose attached volumes may have changed
        self._catalog: VolumeCatalog | None = None  # None: to rebuild

    # --- the storage topics: True when what pods may bind changed ---

    def apply_claim(self, event: VolumeClaimEvent) -> bool:
        return self._put_claim(event.claim.key, None if event.deleted else event.claim)

    def claim_gone(self, key: str) -> bool:
        return self._put_claim(key, None)

    def apply_volume(self, event: PersistentVolumeEvent) -> bool:
        return self._put_volume(event.volume.name, None if event.deleted else event.volume)

    def volume_gone(self, name: str) -> bool:
        return self._put_volume(name, None)

    def apply_class(self, event: StorageClassEvent) -> bool:
        # when it was seen is no change
        kept = None if event.deleted else msgspec.structs.replace(event, observed_at=0.0)
        return self._touch_all(self._put(self._classes, event.storage_class.name, kept))

    def class_gone(self, name: str) -> bool:
        return self._touch_all(self._put(self._classes, name, None))

    def take_touched(self) -> set[str]:
        """The nodes whose attached volumes changed since last asked (their state is to be rebuilt)."""
        touched, self._touched = self._touched, set()
        return touched

    def _put_claim(self, key: str, claim: PersistentVolumeClaim | None) -> bool:
        before = self._claims.get(key)
        if before is not None and before.volume_name:
            self._claim_of_volume.pop(before.volume_name, None)
        if claim is not None and claim.volume_name:
            self._claim_of_volume[claim.volume_name] = key
        changed = self._put(self._claims, key, claim)
        if changed:
            self._touched |= self._mounts.nodes_mounting((key,))
        return changed

    def _put_volume(self, name: str, volume: PersistentVolume | None) -> bool:
        claims = {v.claim for v in (self._volumes.get(name), volume) if v is not None and v.claim}
        changed = self._put(self._volumes, name, volume)
        if changed:  # the volume of the claim bound to it, or of the claim it names
            claims |= {self._claim_of_volume[name]} if name in self._claim_of_volume else set()
            self._touched |= self._mounts.nodes_mounting(claims)
        return changed

    def _touch_all(self, changed: bool) -> bool:
        """A class changed: an unbound claim's volume-to-be may have (rare: every node mounting claims)."""
        if changed:
            self._touched |= self._mounts.nodes()
        return changed

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

    def decided(self, pending: PendingPodEvent, node: str) -> None:
        """The pod was placed (assumed) on `node`: its claims count as in use until the cluster reports it."""
        if pending.volume_claims:
            keys = tuple(f"{pending.namespace}/{name}" for name in pending.volume_claims)
            self._mounts.set_placed(pending.uid, Mounted(node, keys))

    def apply_lifecycle(self, event: PodLifecycleEvent) -> None:
        self._mounts.set_placed(event.uid, None)  # bound (its own claims now) or deleted
        before = self._mounts.bound.get(event.uid)
        after = None
        if event.phase is LifecyclePhase.BOUND and event.volume_claims:
            after = Mounted(event.node, tuple(f"{event.namespace}/{name}" for name in event.volume_claims))
        if before != after:
            self._mounts.set_bound(event.uid, after)
            self._catalog = None

    # --- CSINodes and the volumes attached to each node (NodeVolumeLimits) ---

    def apply_csi_node(self, event: CsiNodeEvent) -> bool:
        """True when the node's limits changed."""
        limits = None if event.deleted or not event.limits else event.limits
        return self._touch(event.node, self._put(self._csi_limits, event.node, limits))

    def csi_node_gone(self, node: str) -> bool:
        return self._touch(node, self._put(self._csi_limits, node, None))

    def _touch(self, node: str, changed: bool) -> bool:
        if changed:
            self._touched.add(node)
        return changed

    def csi_limits(self, node: str) -> dict[str, int]:
        return dict(self._csi_limits.get(node, {}))

    def attached(self, node: str) -> tuple[CsiVolume, ...]:
        """The CSI volumes of the claims the node's pods mount (bound, or placed here and not yet bound)."""
        self._mounts.forget_placed(self._holds)
        found: dict[CsiVolume, None] = {}
        catalog = self.catalog()
        for key in self._mounts.on_node(node):
            namespace, _, name = key.partition("/")
            found.update(dict.fromkeys(csi_volumes(namespace, (name,), catalog)))
        return tuple(found)

    # --- what the engine reads ---

    def catalog(self) -> VolumeCatalog:
        if self._catalog is None:
            classes: dict[str, StorageClass] = {n: e.storage_class for n, e in self._classes.items()}
            defaults = ((e.created_at, n) for n, e in self._classes.items() if e.default)
            in_use = frozenset(key for mounted in self._mounts.bound.values() for key in mounted.claims)
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
        self._mounts.forget_placed(self._holds)
        placed = self._mounts.placed.items()
        assumed = {key for uid, mounted in placed if uid != pending.uid for key in mounted.claims}
        if assumed - catalog.claims_in_use:
            catalog = msgspec.structs.replace(catalog, claims_in_use=catalog.claims_in_use | assumed)
        return resolve_volumes(pending.namespace, pending.volume_claims, catalog)
