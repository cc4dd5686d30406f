"""PersistentVolumeClaims, PersistentVolumes, StorageClasses and a pod's claims, read as kube-scheduler reads them.

The one decoding of storage objects that both the cluster watcher (objects from its watch) and
`engine place --cluster` (objects from files, topoplace/cluster_objects/storage.py) use, so the two
read an object alike: the object's fields as msgspec Structs, and pure functions to the engine's
Structs (schemas/volumes.py). A field that cannot be read (a bad quantity, a bad topology term) raises
StorageFieldError naming the field.

- A claim's class is `spec.storageClassName` (absent: the cluster's default class; "": no class), its
  node the annotation `volume.kubernetes.io/selected-node`.
- A volume is available when it has no `spec.claimRef`; its node terms are `spec.nodeAffinity.required`.
- The default StorageClass is the one annotated `storageclass.kubernetes.io/is-default-class: "true"`
  (the newest of several, as the admission plugin picks).
- A pod's claims are its `persistentVolumeClaim.claimName` volumes and, for a generic ephemeral volume,
  the claim `<pod>-<volume>` Kubernetes creates for it.
- A volume's `spec.csi` names its driver and volume handle; a CSINode (named as its node) says how many
  volumes each driver may attach there (`spec.drivers[].allocatable.count`; absent: no limit).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from schemas.errors import FieldError
from schemas.kube import NodeSelectorTerm
from schemas.quantity import QuantityError, parse_quantity
from schemas.volumes import SELECTED_NODE, CsiVolume, PersistentVolume, PersistentVolumeClaim, StorageClass

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


class StorageFieldError(FieldError):
    """A storage object's field that cannot be read; `field` names it."""


class StorageMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = "default"
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None


class StorageRequests(msgspec.Struct, kw_only=True):
    requests: dict[str, str | int | float] = {}


class ClaimSpec(msgspec.Struct, kw_only=True, rename="camel"):
    volume_name: str = ""
    storage_class_name: str | None = None
    access_modes: tuple[str, ...] = ()
    resources: StorageRequests = msgspec.field(default_factory=StorageRequests)


class ObjectPhase(msgspec.Struct, kw_only=True):
    phase: str = ""  # Pending, Available, Bound, Released, Lost


class ClaimObject(msgspec.Struct, kw_only=True):
    """A PersistentVolumeClaim (core/v1), the fields read."""

    metadata: StorageMeta = msgspec.field(default_factory=StorageMeta)
    spec: ClaimSpec = msgspec.field(default_factory=ClaimSpec)
    status: ObjectPhase = msgspec.field(default_factory=ObjectPhase)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def bound(self) -> bool:
        """Bound to its volume, as the PersistentVolume controller says once binding is complete."""
        return bool(self.spec.volume_name) and self.status.phase == "Bound"


class ClaimRef(msgspec.Struct, kw_only=True):
    name: str = ""
    namespace: str = "default"


class VolumeNodeSelector(msgspec.Struct, kw_only=True, rename="camel"):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class VolumeNodeAffinity(msgspec.Struct, kw_only=True):
    required: VolumeNodeSelector | None = None


class CsiSource(msgspec.Struct, kw_only=True, rename="camel"):
    driver: str
    volume_handle: str


class VolumeSpec(msgspec.Struct, kw_only=True, rename="camel"):
    csi: CsiSource | None = None
    storage_class_name: str = ""
    capacity: dict[str, str | int | float] = {}
    access_modes: tuple[str, ...] = ()
    claim_ref: ClaimRef | None = None
    node_affinity: VolumeNodeAffinity | None = None


class VolumeObject(msgspec.Struct, kw_only=True):
    """A PersistentVolume (core/v1), the fields read."""

    metadata: StorageMeta = msgspec.field(default_factory=StorageMeta)
    spec: VolumeSpec = msgspec.field(default_factory=VolumeSpec)


class DriverAllocatable(msgspec.Struct, kw_only=True):
    count: int | None = None


class CsiNodeDriver(msgspec.Struct, kw_only=True):
    name: str
    allocatable: DriverAllocatable | None = None


class CsiNodeSpec(msgspec.Struct, kw_only=True):
    drivers: tuple[CsiNodeDriver, ...] = ()


class CsiNodeObject(msgspec.Struct, kw_only=True):
    """A CSINode (storage.k8s.io/v1), the fields read; named as its node."""

    metadata: StorageMeta = msgspec.field(default_factory=StorageMeta)
    spec: CsiNodeSpec = msgspec.field(default_factory=CsiNodeSpec)


class TopologyRequirement(msgspec.Struct, kw_only=True):
    key: str
    values: tuple[str, ...]


class TopologyTerm(msgspec.Struct, kw_only=True, rename="camel"):
    match_label_expressions: tuple[TopologyRequirement, ...] = ()


class StorageClassObject(msgspec.Struct, kw_only=True, rename="camel"):
    """A StorageClass (storage.k8s.io/v1), the fields read."""

    metadata: StorageMeta = msgspec.field(default_factory=StorageMeta)
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"
    allowed_topologies: tuple[TopologyTerm, ...] = ()


class PodVolumeClaim(msgspec.Struct, kw_only=True, rename="camel"):
    claim_name: str


class PodVolume(msgspec.Struct, kw_only=True, rename="camel"):
    """One entry of a Pod's spec.volumes, the parts that name a claim."""

    name: str = ""
    persistent_volume_claim: PodVolumeClaim | None = None
    ephemeral: dict[str, Any] | None = None


class PodVolumesMeta(msgspec.Struct, kw_only=True):
    name: str = ""
    namespace: str = "default"
    uid: str = ""


class PodVolumesSpec(msgspec.Struct, kw_only=True):
    volumes: tuple[PodVolume, ...] = ()


class PodVolumesObject(msgspec.Struct, kw_only=True):
    """A Pod, only what names its claims."""

    metadata: PodVolumesMeta = msgspec.field(default_factory=PodVolumesMeta)
    spec: PodVolumesSpec = msgspec.field(default_factory=PodVolumesSpec)

    def claim_names(self) -> tuple[str, ...]:
        return pod_claim_names(self.metadata.name, self.spec.volumes)


def storage_bytes(field: str, text: str | int | float | None) -> int:
    """A storage quantity in bytes (absent: 0). StorageFieldError naming `field`."""
    if text is None:
        return 0
    try:
        return int(parse_quantity(str(text)))
    except QuantityError as exc:
        raise StorageFieldError(field, str(exc)) from None


def claim_of(obj: ClaimObject) -> PersistentVolumeClaim:
    spec = obj.spec
    return PersistentVolumeClaim(
        namespace=obj.metadata.namespace,
        name=obj.metadata.name,
        volume_name=spec.volume_name,
        storage_class=spec.storage_class_name,
        access_modes=spec.access_modes,
        request_bytes=storage_bytes("spec.resources.requests.storage", spec.resources.requests.get("storage")),
        selected_node=obj.metadata.annotations.get(SELECTED_NODE, ""),
        deleting=obj.metadata.deletion_timestamp is not None,
    )


def volume_of(obj: VolumeObject) -> PersistentVolume:
    spec = obj.spec
    required = spec.node_affinity.required if spec.node_affinity is not None else None
    ref = spec.claim_ref
    return PersistentVolume(
        name=obj.metadata.name,
        storage_class=spec.storage_class_name,
        capacity_bytes=storage_bytes("spec.capacity.storage", spec.capacity.get("storage")),
        access_modes=spec.access_modes,
        node_terms=required.node_selector_terms if required is not None else (),
        claim=f"{ref.namespace}/{ref.name}" if ref is not None and ref.name else "",
        labels=dict(obj.metadata.labels),
        deleting=obj.metadata.deletion_timestamp is not None,
        csi=CsiVolume(driver=spec.csi.driver, handle=spec.csi.volume_handle) if spec.csi is not None else None,
    )


def csi_limits_of(obj: CsiNodeObject) -> dict[str, int]:
    """The volumes each of the node's CSI drivers may attach there (a driver without a count: no limit)."""
    limits: dict[str, int] = {}
    for i, driver in enumerate(obj.spec.drivers):
        count = driver.allocatable.count if driver.allocatable is not None else None
        if count is None:
            continue
        if count < 0:
            raise StorageFieldError(f"spec.drivers[{i}].allocatable.count", "must not be negative")
        limits[driver.name] = count
    return limits


def storage_class_of(obj: StorageClassObject) -> StorageClass:
    terms = []
    for i, term in enumerate(obj.allowed_topologies):
        expressions = [{"key": r.key, "operator": "In", "values": list(r.values)} for r in term.match_label_expressions]
        try:
            terms.append(msgspec.convert({"matchExpressions": expressions}, NodeSelectorTerm))
        except (msgspec.ValidationError, ValueError) as exc:
            raise StorageFieldError(f"allowedTopologies[{i}]", str(exc)) from None
    return StorageClass(
        name=obj.metadata.name,
        provisioner=obj.provisioner,
        binding_mode=obj.volume_binding_mode,
        allowed_topologies=tuple(terms),
    )


def is_default_class(obj: StorageClassObject) -> bool:
    return obj.metadata.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"


def default_class(defaults: Iterable[tuple[str, str]]) -> str:
    """The default class among (creationTimestamp, name) of the classes marked default: the newest; "" if none."""
    marked = sorted(defaults)
    return marked[-1][1] if marked else ""


def pod_claim_names(pod_name: str, volumes: Sequence[PodVolume]) -> tuple[str, ...]:
    """The claims a pod mounts, in the order of its volumes."""
    names: list[str] = []
    for volume in volumes:
        if volume.persistent_volume_claim is not None:
            names.append(volume.persistent_volume_claim.claim_name)
        elif volume.ephemeral is not None:
            names.append(f"{pod_name}-{volume.name}")
    return tuple(names)
