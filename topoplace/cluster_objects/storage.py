"""PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes -> the engine's VolumeCatalog and
each node's attach limits, and a pod's claims.

Each object is decoded as the API server would accept it, by the decoding the cluster watcher uses too
(topoplace/kube_storage.py); a bad quantity or selector term is bad input, naming the file and the field.
CSINodes give each node's attach limit per CSI driver, and the volumes a node's running pods use are
attached there (NodeVolumeLimits).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

import msgspec

from engine.decide.kube.volumes import csi_volumes
from schemas.volumes import CsiVolume, PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeCatalog
from topoplace import kube_storage as ks
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject

STORAGE_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")
DEFAULT_CLASS_ANNOTATION = ks.DEFAULT_CLASS_ANNOTATION

T = TypeVar("T")


def _decoded(item: ClusterObject, kind: type[T]) -> T:
    try:
        return msgspec.convert(item.body, kind)
    except (msgspec.ValidationError, ValueError) as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


def pod_claim_names(item: ClusterObject) -> tuple[str, ...]:
    """The claims a Pod object mounts, in the order of its volumes."""
    return _decoded(item, ks.PodVolumesObject).claim_names()


def catalog_of(items: Iterable[ClusterObject], claims_in_use: Iterable[str] = ()) -> VolumeCatalog:
    """The storage objects among `items`, as the engine's catalog. Raises ClusterInputError."""
    claims: dict[str, PersistentVolumeClaim] = {}
    volumes: dict[str, PersistentVolume] = {}
    classes: dict[str, StorageClass] = {}
    defaults: list[tuple[str, str]] = []
    for item in items:
        try:
            if item.kind == "PersistentVolumeClaim":
                claim = ks.claim_of(_decoded(item, ks.ClaimObject))
                claims[claim.key] = claim
            elif item.kind == "PersistentVolume":
                volume = ks.volume_of(_decoded(item, ks.VolumeObject))
                volumes[volume.name] = volume
            elif item.kind == "StorageClass":
                obj = _decoded(item, ks.StorageClassObject)
                classes[obj.metadata.name] = ks.storage_class_of(obj)
                if ks.is_default_class(obj):
                    defaults.append((obj.metadata.creation_timestamp or "", obj.metadata.name))
        except ks.StorageFieldError as exc:
            raise ClusterInputError(item.where, exc.field, exc.reason) from None
    return VolumeCatalog(
        claims=claims,
        volumes=volumes,
        classes=classes,
        default_class=ks.default_class(defaults),
        claims_in_use=frozenset(claims_in_use),
    )


def csi_limits(items: Iterable[ClusterObject]) -> dict[str, dict[str, int]]:
    """Per node (a CSINode is named as its node), the volumes each driver may attach there."""
    limits: dict[str, dict[str, int]] = {}
    for item in items:
        if item.kind != "CSINode":
            continue
        csi_node = _decoded(item, ks.CsiNodeObject)
        try:
            node_limits = ks.csi_limits_of(csi_node)
        except ks.StorageFieldError as exc:
            raise ClusterInputError(item.where, exc.field, exc.reason) from None
        if node_limits:
            limits.setdefault(csi_node.metadata.name, {}).update(node_limits)
    return limits


def attached_volumes(
    pods_on_nodes: Iterable[tuple[ClusterObject, str]], catalog: VolumeCatalog
) -> Mapping[str, tuple[CsiVolume, ...]]:
    """Per node, the CSI volumes its running pods use (each once), from (Pod object, node name) pairs."""
    found: dict[str, dict[CsiVolume, None]] = {}
    for item, node in pods_on_nodes:
        namespace = item.body.get("metadata", {}).get("namespace") or "default"
        for volume in csi_volumes(namespace, pod_claim_names(item), catalog):
            found.setdefault(node, {})[volume] = None
    return {node: tuple(volumes) for node, volumes in found.items()}
