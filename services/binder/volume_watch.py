"""PersistentVolumeClaims, PersistentVolumes and StorageClasses from the binder's own list+watch.

The binder trusts no topic for volumes either: before it asks for a pod's claims to be bound, and
again before it writes the pod's Binding, it reads them here (decoded by topoplace/kube_storage.py,
as the cluster watcher and `engine place --cluster` decode them). Every change wakes whoever waits
for claims to be bound (`wait_until`): a watch, not a poll.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes_asyncio import client

from schemas.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeCatalog
from services.binder.metrics import INFORMER_METRICS
from topoplace import kube_storage as ks
from topoplace.informer import Informer
from topoplace.kube_storage import ClaimObject, StorageClassObject, VolumeObject

V = TypeVar("V")


class StorageWatch:
    """The cluster's claims (by namespace/name), volumes and classes (by name), as the watch last saw them."""

    def __init__(self) -> None:
        self._claims: dict[str, ClaimObject] = {}
        self._volumes: dict[str, VolumeObject] = {}
        self._classes: dict[str, StorageClassObject] = {}
        self._waiters: set[asyncio.Future[None]] = set()

    # --- the watch's side ---

    def replace_claims(self, claims: list[ClaimObject]) -> None:
        self._claims = {c.key: c for c in claims}
        self._wake()

    def apply_claim(self, event_type: str, claim: ClaimObject) -> None:
        _apply(self._claims, claim.key, None if event_type == "DELETED" else claim)
        self._wake()

    def replace_volumes(self, volumes: list[VolumeObject]) -> None:
        self._volumes = {v.metadata.name: v for v in volumes}
        self._wake()

    def apply_volume(self, event_type: str, volume: VolumeObject) -> None:
        _apply(self._volumes, volume.metadata.name, None if event_type == "DELETED" else volume)
        self._wake()

    def replace_classes(self, classes: list[StorageClassObject]) -> None:
        self._classes = {c.metadata.name: c for c in classes}
        self._wake()

    def apply_class(self, event_type: str, storage_class: StorageClassObject) -> None:
        _apply(self._classes, storage_class.metadata.name, None if event_type == "DELETED" else storage_class)
        self._wake()

    # --- the binder's side ---

    def claim(self, key: str) -> ClaimObject | None:
        return self._claims.get(key)

    def volume(self, name: str) -> VolumeObject | None:
        return self._volumes.get(name)

    def catalog(self) -> VolumeCatalog:
        """What the engine's volume rules read. A field the watch could not read leaves that object out
        of what may be bound (a claim asking 0 is never bound by it: the claim's own request is kept)."""
        claims: dict[str, PersistentVolumeClaim] = {}
        for key, claim in self._claims.items():
            try:
                claims[key] = ks.claim_of(claim)
            except ks.StorageFieldError:
                continue  # "not found" for the pod that mounts it: never bound on a guess
        volumes: dict[str, PersistentVolume] = {}
        for name, volume in self._volumes.items():
            try:
                volumes[name] = ks.volume_of(volume)
            except ks.StorageFieldError:
                continue
        classes: dict[str, StorageClass] = {}
        for name, storage_class in self._classes.items():
            try:
                classes[name] = ks.storage_class_of(storage_class)
            except ks.StorageFieldError:
                continue
        defaults = (
            (c.metadata.creation_timestamp or "", n) for n, c in self._classes.items() if ks.is_default_class(c)
        )
        return VolumeCatalog(claims=claims, volumes=volumes, classes=classes, default_class=ks.default_class(defaults))

    async def wait_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait, woken by the watch's changes, until `done()`; False when `timeout` seconds passed first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done():
            left = deadline - loop.time()
            if left <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.add(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                return done()
            finally:
                self._waiters.discard(waiter)
        return True

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()


def _apply(table: dict[str, V], key: str, obj: V | None) -> None:
    if obj is None:
        table.pop(key, None)
    else:
        table[key] = obj


def watch_storage(
    core: client.CoreV1Api, storage: StorageWatch, *, resync_seconds: float = 300.0
) -> list[Informer[Any]]:
    """Claims, volumes and classes of the whole cluster into `storage`."""
    storage_api = client.StorageV1Api(core.api_client)  # type: ignore[attr-defined]  # the stubs omit it

    async def claims_listed(objs: list[ClaimObject], resync: bool) -> None:
        storage.replace_claims(objs)

    async def claim_changed(event_type: str, obj: ClaimObject) -> None:
        storage.apply_claim(event_type, obj)

    async def volumes_listed(objs: list[VolumeObject], resync: bool) -> None:
        storage.replace_volumes(objs)

    async def volume_changed(event_type: str, obj: VolumeObject) -> None:
        storage.apply_volume(event_type, obj)

    async def classes_listed(objs: list[StorageClassObject], resync: bool) -> None:
        storage.replace_classes(objs)

    async def class_changed(event_type: str, obj: StorageClassObject) -> None:
        storage.apply_class(event_type, obj)

    return [
        Informer(
            "persistentvolumeclaims",
            core.list_persistent_volume_claim_for_all_namespaces,
            ClaimObject,
            on_list=claims_listed,
            on_change=claim_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
        ),
        Informer(
            "persistentvolumes",
            core.list_persistent_volume,
            VolumeObject,
            on_list=volumes_listed,
            on_change=volume_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
        ),
        Informer(
            "storageclasses",
            storage_api.list_storage_class,
            StorageClassObject,
            on_list=classes_listed,
            on_change=class_changed,
            metrics=INFORMER_METRICS,
            resync_seconds=resync_seconds,
        ),
    ]
