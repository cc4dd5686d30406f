"""Storage as the scheduler reads it: claims, volumes and classes, and one pod's volume rules.

The cluster's PersistentVolumeClaims, PersistentVolumes and StorageClasses reduced to what
kube-scheduler's volume filters read (engine/decide/kube/volumes.py), and `VolumeRules`: a pod's
claims resolved against them once per decision, which the pod request carries to every node check.
"""

from __future__ import annotations

import msgspec

from schemas.kube import NodeSelectorTerm

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
SELECTED_NODE = "volume.kubernetes.io/selected-node"  # the annotation kube's PreBind sets on a claim


class CsiVolume(msgspec.Struct, frozen=True, kw_only=True):
    """A volume of a CSI driver, one per volume handle (NodeVolumeLimits counts these per driver)."""

    driver: str
    handle: str


class StorageClass(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    provisioner: str = ""
    binding_mode: str = "Immediate"  # volumeBindingMode
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()  # empty: every node


class PersistentVolume(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    storage_class: str = ""
    capacity_bytes: int = 0
    access_modes: tuple[str, ...] = ()
    node_terms: tuple[NodeSelectorTerm, ...] = ()  # spec.nodeAffinity.required (empty: every node)
    claim: str = ""  # spec.claimRef as namespace/name ("" = available)
    labels: dict[str, str] = {}
    deleting: bool = False
    csi: CsiVolume | None = None  # spec.csi: its driver and volumeHandle


class PersistentVolumeClaim(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    volume_name: str = ""  # spec.volumeName: bound (or pre-bound) to this volume
    storage_class: str | None = None  # None: the cluster's default class
    access_modes: tuple[str, ...] = ()
    request_bytes: int = 0
    selected_node: str = ""
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class VolumeCatalog(msgspec.Struct, frozen=True, kw_only=True):
    """The cluster's storage objects, and the ReadWriteOncePod claims running pods already use."""

    claims: dict[str, PersistentVolumeClaim] = {}  # by namespace/name
    volumes: dict[str, PersistentVolume] = {}
    classes: dict[str, StorageClass] = {}
    default_class: str = ""
    claims_in_use: frozenset[str] = frozenset()  # namespace/name of claims a running pod mounts


class UnboundClaim(msgspec.Struct, frozen=True, kw_only=True):
    """A WaitForFirstConsumer claim: the volumes it could bind, and where it could be provisioned."""

    key: str
    request_bytes: int
    selected_node: str = ""
    volumes: tuple[PersistentVolume, ...] = ()  # candidate volumes, smallest first
    provision_terms: tuple[NodeSelectorTerm, ...] | None = None  # None: cannot be provisioned; (): anywhere


class VolumeRules(msgspec.Struct, frozen=True, kw_only=True):
    """One pod's volume constraints, resolved against the cluster (PreFilter's result)."""

    pre_filter: tuple[str, str] | None = None  # (plugin, reason) failing every node
    bound: tuple[PersistentVolume, ...] = ()
    missing_volume: bool = False
    unbound: tuple[UnboundClaim, ...] = ()
    csi: tuple[CsiVolume, ...] = ()  # the CSI volumes its claims use or will (NodeVolumeLimits)
