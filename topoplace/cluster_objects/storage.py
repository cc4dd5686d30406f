"""PersistentVolumeClaims, PersistentVolumes and StorageClasses -> the engine's VolumeCatalog, and a pod's claims.

Each object is decoded as the API server would accept it (a bad quantity or selector term is bad input,
naming the file and the field). The default StorageClass is the one annotated
`storageclass.kubernetes.io/is-default-class: "true"` (the newest of several, as the admission plugin
picks). A pod's claims are its `persistentVolumeClaim.claimName` volumes and, for a generic ephemeral
volume, the claim `<pod>-<volume>` Kubernetes creates for it. CSINodes give each node's attach limit per
CSI driver, and the volumes a node's running pods use are attached there (NodeVolumeLimits).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

import msgspec

from engine.decide.kube.volumes import csi_volumes
from schemas.kube import NodeSelectorTerm
from schemas.quantity import QuantityError, parse_quantity
from schemas.volumes import CsiVolume, PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeCatalog
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject

STORAGE_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

T = TypeVar("T")


class _Meta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = "default"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    deletion_timestamp: str | None = None
    creation_timestamp: str = ""


class _Resources(msgspec.Struct, kw_only=True):
    requests: dict[str, str] = {}


class _ClaimSpec(msgspec.Struct, kw_only=True, rename="camel"):
    volume_name: str = ""
    storage_class_name: str | None = None
    access_modes: tuple[str, ...] = ()
    resources: _Resources = msgspec.field(default_factory=_Resources)


class _Claim(msgspec.Struct, kw_only=True):
    metadata: _Meta
    spec: _ClaimSpec = msgspec.field(default_factory=_ClaimSpec)


class _ClaimRef(msgspec.Struct, kw_only=True):
    name: str = ""
    namespace: str = "default"


class _NodeSelector(msgspec.Struct, kw_only=True, rename="camel"):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class _VolumeNodeAffinity(msgspec.Struct, kw_only=True):
    required: _NodeSelector | None = None


class _CsiSource(msgspec.Struct, kw_only=True, rename="camel"):
    driver: str
    volume_handle: str


class _VolumeSpec(msgspec.Struct, kw_only=True, rename="camel"):
    csi: _CsiSource | None = None
    storage_class_name: str = ""
    capacity: dict[str, str] = {}
    access_modes: tuple[str, ...] = ()
    claim_ref: _ClaimRef | None = None
    node_affinity: _VolumeNodeAffinity | None = None


class _Volume(msgspec.Struct, kw_only=True):
    metadata: _Meta
    spec: _VolumeSpec = msgspec.field(default_factory=_VolumeSpec)


class _DriverAllocatable(msgspec.Struct, kw_only=True):
    count: int | None = None


class _CsiDriver(msgspec.Struct, kw_only=True):
    name: str
    allocatable: _DriverAllocatable | None = None


class _CsiNodeSpec(msgspec.Struct, kw_only=True):
    drivers: tuple[_CsiDriver, ...] = ()


class _CsiNode(msgspec.Struct, kw_only=True):
    metadata: _Meta
    spec: _CsiNodeSpec = msgspec.field(default_factory=_CsiNodeSpec)


class _TopologyRequirement(msgspec.Struct, kw_only=True):
    key: str
    values: tuple[str, ...]


class _TopologyTerm(msgspec.Struct, kw_only=True, rename="camel"):
    match_label_expressions: tuple[_TopologyRequirement, ...] = ()


class _Class(msgspec.Struct, kw_only=True, rename="camel"):
    metadata: _Meta
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"
    allowed_topologies: tuple[_TopologyTerm, ...] = ()


class _PodVolumeClaim(msgspec.Struct, kw_only=True, rename="camel"):
    claim_name: str


class _PodVolume(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    persistent_volume_claim: _PodVolumeClaim | None = None
    ephemeral: dict[str, object] | None = None


class _PodSpec(msgspec.Struct, kw_only=True):
    volumes: tuple[_PodVolume, ...] = ()


class _PodMeta(msgspec.Struct, kw_only=True):
    name: str = ""


class _Pod(msgspec.Struct, kw_only=True):
    metadata: _PodMeta = msgspec.field(default_factory=_PodMeta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


def _decoded(item: ClusterObject, kind: type[T]) -> T:
    try:
        return msgspec.convert(item.body, kind)
    except (msgspec.ValidationError, ValueError) as exc:
        raise ClusterInputError(item.where, "", str(exc)) from None


def _bytes(item: ClusterObject, field: str, text: str | None) -> int:
    if text is None:
        return 0
    try:
        return int(parse_quantity(text))
    except QuantityError as exc:
        raise ClusterInputError(item.where, field, str(exc)) from None


def pod_claim_names(item: ClusterObject) -> tuple[str, ...]:
    """The claims a Pod object mounts, in the order of its volumes."""
    pod = _decoded(item, _Pod)
    names: list[str] = []
    for volume in pod.spec.volumes:
        if volume.persistent_volume_claim is not None:
            names.append(volume.persistent_volume_claim.claim_name)
        elif volume.ephemeral is not None:
            names.append(f"{pod.metadata.name}-{volume.name}")
    return tuple(names)


def catalog_of(items: Iterable[ClusterObject], claims_in_use: Iterable[str] = ()) -> VolumeCatalog:
    """The storage objects among `items`, as the engine's catalog. Raises ClusterInputError."""
    claims: dict[str, PersistentVolumeClaim] = {}
    volumes: dict[str, PersistentVolume] = {}
    classes: dict[str, StorageClass] = {}
    defaults: list[tuple[str, str]] = []
    for item in items:
        if item.kind == "PersistentVolumeClaim":
            claim = _claim(item)
            claims[claim.key] = claim
        elif item.kind == "PersistentVolume":
            volume = _volume(item)
            volumes[volume.name] = volume
        elif item.kind == "StorageClass":
            storage_class, created, default = _class(item)
            classes[storage_class.name] = storage_class
            if default:
                defaults.append((created, storage_class.name))
    return VolumeCatalog(
        claims=claims,
        volumes=volumes,
        classes=classes,
        default_class=max(defaults)[1] if defaults else "",
        claims_in_use=frozenset(claims_in_use),
    )


def _claim(item: ClusterObject) -> PersistentVolumeClaim:
    claim = _decoded(item, _Claim)
    return PersistentVolumeClaim(
        namespace=claim.metadata.namespace,
        name=claim.metadata.name,
        volume_name=claim.spec.volume_name,
        storage_class=claim.spec.storage_class_name,
        access_modes=claim.spec.access_modes,
        request_bytes=_bytes(item, "spec.resources.requests.storage", claim.spec.resources.requests.get("storage")),
        selected_node=claim.metadata.annotations.get("volume.kubernetes.io/selected-node", ""),
        deleting=claim.metadata.deletion_timestamp is not None,
    )


def _volume(item: ClusterObject) -> PersistentVolume:
    volume = _decoded(item, _Volume)
    spec = volume.spec
    required = spec.node_affinity.required if spec.node_affinity is not None else None
    ref = spec.claim_ref
    return PersistentVolume(
        name=volume.metadata.name,
        storage_class=spec.storage_class_name,
        capacity_bytes=_bytes(item, "spec.capacity.storage", spec.capacity.get("storage")),
        access_modes=spec.access_modes,
        node_terms=required.node_selector_terms if required is not None else (),
        claim=f"{ref.namespace}/{ref.name}" if ref is not None and ref.name else "",
        labels=volume.metadata.labels,
        deleting=volume.metadata.deletion_timestamp is not None,
        csi=CsiVolume(driver=spec.csi.driver, handle=spec.csi.volume_handle) if spec.csi is not None else None,
    )


def _class(item: ClusterObject) -> tuple[StorageClass, str, bool]:
    storage_class = _decoded(item, _Class)
    terms = tuple(
        _decoded(
            ClusterObject(kind="", where=item.where, body={"matchExpressions": [
                {"key": r.key, "operator": "In", "values": list(r.values)} for r in term.match_label_expressions
            ]}),
            NodeSelectorTerm,
        )
        for term in storage_class.allowed_topologies
    )  # fmt: skip
    meta = storage_class.metadata
    return (
        StorageClass(
            name=meta.name,
            provisioner=storage_class.provisioner,
            binding_mode=storage_class.volume_binding_mode,
            allowed_topologies=terms,
        ),
        meta.creation_timestamp,
        meta.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true",
    )


def csi_limits(items: Iterable[ClusterObject]) -> dict[str, dict[str, int]]:
    """Per node (a CSINode is named as its node), the volumes each driver may attach there."""
    limits: dict[str, dict[str, int]] = {}
    for item in items:
        if item.kind != "CSINode":
            continue
        csi_node = _decoded(item, _CsiNode)
        for i, driver in enumerate(csi_node.spec.drivers):
            count = driver.allocatable.count if driver.allocatable is not None else None
            if count is None:
                continue
            if count < 0:
                raise ClusterInputError(item.where, f"spec.drivers[{i}].allocatable.count", "must not be negative")
            limits.setdefault(csi_node.metadata.name, {})[driver.name] = count
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
