"""kube-scheduler's volume filters: VolumeRestrictions (ReadWriteOncePod), VolumeBinding, VolumeZone.

A pod's PersistentVolumeClaims are resolved against the cluster's claims, volumes and classes once per
decision (`resolve_volumes`, what kube does in PreFilter) into `VolumeRules`, which every node is then
checked against by its name and labels (`volume_failure`, kube's Filter):

- a claim that does not exist, is being deleted, is unbound with an Immediate class, or whose class does
  not exist fails the pod on every node (kube: UnschedulableAndUnresolvable at PreFilter, with its words);
  so does a ReadWriteOncePod claim another pod already uses (VolumeRestrictions);
- a bound claim's PersistentVolume must have node affinity matching the node ("node(s) had volume node
  affinity conflict"), and must exist ("...bound to non-existent pv(s)");
- an unbound claim with a WaitForFirstConsumer class is matched, on each node, to the smallest available
  PersistentVolume of its class that the node can reach (claims of one pod never share one), else
  provisioned if the class has a provisioner whose allowedTopologies include the node; a claim that already
  names its node (`volume.kubernetes.io/selected-node`) fits that node only
  ("node(s) didn't find available persistent volumes to bind");
- VolumeZone: a bound volume's zone and region labels must be the node's ("node(s) had no available
  volume zone").

`csi_volumes` names the CSI volumes a pod's claims use or will (NodeVolumeLimits, volume_limits.py);
`binding_plan` is what the chosen node then means for each unbound claim (a static volume to pre-bind,
or provisioning there): what the binder writes in kube's PreBind.

Not modelled: storage capacity (CSIStorageCapacity), volume modes, claim label selectors, CSI
migration of in-tree volumes.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from engine.decide.kube.affinity import NodeAffinityRules
from schemas.kube import Affinity, NodeAffinity, NodeSelector, NodeSelectorTerm
from schemas.volumes import (
    NO_PROVISIONER,
    READ_WRITE_ONCE_POD,
    WAIT_FOR_FIRST_CONSUMER,
    CsiVolume,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    UnboundClaim,
    VolumeCatalog,
    VolumeRules,
)

VOLUME_RESTRICTIONS = "VolumeRestrictions"
VOLUME_BINDING = "VolumeBinding"
VOLUME_ZONE = "VolumeZone"

ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)

NODE_CONFLICT_REASON = "node(s) had volume node affinity conflict"
BIND_CONFLICT_REASON = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST_REASON = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_CONFLICT_REASON = "node(s) had no available volume zone"
UNBOUND_IMMEDIATE_REASON = "pod has unbound immediate PersistentVolumeClaims"
RWOP_CONFLICT_REASON = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"

Labels = Mapping[str, str]


def resolve_volumes(namespace: str, claim_names: tuple[str, ...], catalog: VolumeCatalog) -> VolumeRules:
    """The pod's claims (`persistentVolumeClaim.claimName` of its volumes) against the cluster."""
    bound: list[PersistentVolume] = []
    unbound: list[UnboundClaim] = []
    missing = False
    for name in claim_names:
        claim = catalog.claims.get(f"{namespace}/{name}")
        if claim is None:
            return VolumeRules(pre_filter=(VOLUME_BINDING, f'persistentvolumeclaim "{name}" not found'))
        if claim.deleting:
            return VolumeRules(pre_filter=(VOLUME_BINDING, f'persistentvolumeclaim "{name}" is being deleted'))
        if READ_WRITE_ONCE_POD in claim.access_modes and claim.key in catalog.claims_in_use:
            return VolumeRules(pre_filter=(VOLUME_RESTRICTIONS, RWOP_CONFLICT_REASON))
        if claim.volume_name:
            volume = catalog.volumes.get(claim.volume_name)
            missing = missing or volume is None
            bound.extend(() if volume is None else (volume,))
            continue
        class_name = catalog.default_class if claim.storage_class is None else claim.storage_class
        storage_class = catalog.classes.get(class_name)
        if storage_class is None or storage_class.binding_mode != WAIT_FOR_FIRST_CONSUMER:
            reason = (
                f'storageclass.storage.k8s.io "{class_name}" not found'
                if class_name and storage_class is None
                else UNBOUND_IMMEDIATE_REASON
            )
            return VolumeRules(pre_filter=(VOLUME_BINDING, reason))
        unbound.append(_unbound(claim, storage_class, catalog))
    # kube matches the smallest claims first, each to the smallest volume that fits.
    unbound.sort(key=lambda c: c.request_bytes)
    return VolumeRules(
        bound=tuple(bound),
        missing_volume=missing,
        unbound=tuple(unbound),
        csi=csi_volumes(namespace, claim_names, catalog),
    )


def csi_volumes(namespace: str, claim_names: tuple[str, ...], catalog: VolumeCatalog) -> tuple[CsiVolume, ...]:
    """The CSI volumes of these claims (kube's filterAttachableVolumes): a bound claim's volume's `spec.csi`,
    an unbound claim's class provisioner with a placeholder handle (a volume not attached anywhere yet).
    Claims missing, volumes without a CSI source and classes missing count nothing."""
    found: list[CsiVolume] = []
    for name in claim_names:
        claim = catalog.claims.get(f"{namespace}/{name}")
        if claim is None:
            continue
        if claim.volume_name:
            volume = catalog.volumes.get(claim.volume_name)
            if volume is not None and volume.csi is not None:
                found.append(volume.csi)
            continue
        class_name = catalog.default_class if claim.storage_class is None else claim.storage_class
        storage_class = catalog.classes.get(class_name) if class_name else None
        if storage_class is not None and storage_class.provisioner:
            found.append(CsiVolume(driver=storage_class.provisioner, handle=f"unbound:{claim.key}"))
    return tuple(found)


def _unbound(claim: PersistentVolumeClaim, storage_class: StorageClass, catalog: VolumeCatalog) -> UnboundClaim:
    volumes = sorted(
        (v for v in catalog.volumes.values() if _may_bind(v, claim, storage_class.name)),
        key=lambda v: (v.capacity_bytes, v.name),
    )
    provisionable = storage_class.provisioner not in ("", NO_PROVISIONER)
    return UnboundClaim(
        key=claim.key,
        request_bytes=claim.request_bytes,
        selected_node=claim.selected_node,
        volumes=tuple(volumes),
        provision_terms=storage_class.allowed_topologies if provisionable else None,
    )


def _may_bind(volume: PersistentVolume, claim: PersistentVolumeClaim, class_name: str) -> bool:
    """The volume could bind the claim on some node: free (or pre-bound to it), same class, big enough,
    every access mode the claim asks."""
    return (
        not volume.deleting
        and volume.claim in ("", claim.key)
        and volume.storage_class == class_name
        and volume.capacity_bytes >= claim.request_bytes
        and set(claim.access_modes) <= set(volume.access_modes)
    )


def volume_failure(rules: VolumeRules, node_name: str, labels: Labels) -> tuple[str, list[str]] | None:
    """The first volume filter the node fails, with kube's reasons, or None."""
    if rules.pre_filter is not None:
        return rules.pre_filter[0], [rules.pre_filter[1]]
    reasons: list[str] = []
    if not all(_terms_match(v.node_terms, node_name, labels) for v in rules.bound):
        reasons.append(NODE_CONFLICT_REASON)
    if not _unbound_satisfied(rules.unbound, node_name, labels):
        reasons.append(BIND_CONFLICT_REASON)
    if rules.missing_volume:
        reasons.append(PV_NOT_EXIST_REASON)
    if reasons:
        return VOLUME_BINDING, reasons
    if not all(_zone_matches(v.labels, labels) for v in rules.bound):
        return VOLUME_ZONE, [ZONE_CONFLICT_REASON]
    return None


def _unbound_satisfied(claims: tuple[UnboundClaim, ...], node_name: str, labels: Labels) -> bool:
    chosen: set[str] = set()
    for claim in claims:
        if claim.selected_node:
            if claim.selected_node != node_name:
                return False
        else:
            volume = next(
                (v for v in claim.volumes if v.name not in chosen and _terms_match(v.node_terms, node_name, labels)),
                None,
            )
            if volume is not None:
                chosen.add(volume.name)
                continue
        if claim.provision_terms is None or not _terms_match(claim.provision_terms, node_name, labels):
            return False
    return True


def _terms_match(terms: tuple[NodeSelectorTerm, ...], node_name: str, labels: Labels) -> bool:
    """Node selector terms, ORed; none: every node."""
    if not terms:
        return True
    selector = NodeAffinity(required_during_scheduling_ignored_during_execution=NodeSelector(node_selector_terms=terms))
    return NodeAffinityRules({}, Affinity(node_affinity=selector)).required_matches(node_name, labels)


def _zone_matches(volume_labels: Labels, node_labels: Labels) -> bool:
    """Each zone / region label of the volume (values joined by "__" are a set) names the node's value."""
    for key in ZONE_LABELS:
        wanted = volume_labels.get(key)
        if wanted is not None and node_labels.get(key) not in set(wanted.split("__")):
            return False
    return True


class ClaimBinding(msgspec.Struct, frozen=True, kw_only=True):
    """How one unbound claim gets its volume on the chosen node: a static volume, or provisioned there."""

    claim: str  # namespace/name
    volume: str = ""  # the static volume to bind ("": provisioned on the node)


def binding_plan(rules: VolumeRules, node_name: str, labels: Labels) -> tuple[ClaimBinding, ...]:
    """For a node the volume filters passed: each unbound claim's binding there, as kube's FindPodVolumes
    chooses them (the smallest claims first, each the smallest free volume the node reaches, else
    provisioning; a claim that already names its node is provisioned there)."""
    chosen: set[str] = set()
    plan: list[ClaimBinding] = []
    for claim in rules.unbound:
        volume = None
        if not claim.selected_node:
            volume = next(
                (v for v in claim.volumes if v.name not in chosen and _terms_match(v.node_terms, node_name, labels)),
                None,
            )
        if volume is not None:
            chosen.add(volume.name)
        plan.append(ClaimBinding(claim=claim.key, volume=volume.name if volume is not None else ""))
    return tuple(plan)
