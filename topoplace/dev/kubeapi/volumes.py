"""The test server's storage controllers: what a CSI external-provisioner and kube-controller-manager's
PersistentVolume controller do, as far as a scheduler can see it.

- A claim of a `WaitForFirstConsumer` class with a provisioner, once the scheduler names its node
  (annotation `volume.kubernetes.io/selected-node`), gets a new PersistentVolume `pvc-<claim uid>`:
  its class, the claim's size and access modes, `claimRef` to the claim, node affinity for the
  selected node's topology (its `topology.kubernetes.io/zone` label; a node without one: its
  `kubernetes.io/hostname`), annotated `pv.kubernetes.io/provisioned-by`; the provisioner also
  records itself on the claim (`volume.kubernetes.io/storage-provisioner`).
- A claim of an `Immediate` class with a provisioner gets its volume at once, with no node affinity.
- A PersistentVolume whose `spec.claimRef` names an unbound claim (a static volume the scheduler
  pre-bound, or one just provisioned) binds it: the claim gets `spec.volumeName`, the annotations
  `pv.kubernetes.io/bind-completed` and `pv.kubernetes.io/bound-by-controller`, `status.phase: Bound`
  with its capacity and access modes; the volume `status.phase: Bound`.

It runs in the same step as the write that caused it (see `Controller` in store.py), so a test sees a
claim bound as soon as the annotation that asked for it is written. `kubernetes.io/no-provisioner`
classes are never provisioned, as on a real cluster.
"""

from __future__ import annotations

import logging
from typing import Any

from topoplace.dev.kubeapi import resources
from topoplace.dev.kubeapi.changes import DELETED, Change, Object
from topoplace.dev.kubeapi.errors import ApiError
from topoplace.dev.kubeapi.store import ObjectStore

log = logging.getLogger(__name__)

SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"


class VolumeProvisioner:
    """Provisions claims and binds claims to the volumes that name them (see the module's text)."""

    def __init__(self) -> None:
        self._binding: set[str] = set()  # uids of claims being bound now: their own changes are ours

    def install(self, store: ObjectStore) -> None:
        store.add_controller(self)

    def on_change(self, store: ObjectStore, change: Change) -> None:
        if change.type == DELETED:
            return
        try:
            if change.resource == resources.PERSISTENTVOLUMECLAIMS.key:
                self._claim_changed(store, change.obj)
            elif change.resource == resources.PERSISTENTVOLUMES.key:
                self._volume_changed(store, change.obj)
        except ApiError as exc:  # a controller never raises: the next change tries again
            log.warning("volume controller on %s %s: %s", change.resource, change.obj["metadata"]["name"], exc.message)

    def _claim_changed(self, store: ObjectStore, claim: Object) -> None:
        meta, spec = claim["metadata"], claim.get("spec") or {}
        if meta.get("uid") in self._binding:
            return
        if not (claim.get("status") or {}).get("phase"):
            _set_phase(store, resources.PERSISTENTVOLUMECLAIMS, claim, "Pending")  # its change comes back here
            return
        if meta.get("deletionTimestamp"):
            return
        if spec.get("volumeName"):
            self._claim_names_volume(store, claim, spec["volumeName"])
            return
        class_name = spec.get("storageClassName")
        if not class_name:
            return  # the default class is filled in by admission on a real cluster; the test server has none
        try:
            storage_class = store.get(resources.STORAGECLASSES, class_name)
        except ApiError:
            return
        provisioner = storage_class.get("provisioner") or ""
        if provisioner in ("", NO_PROVISIONER):
            return
        waits = storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"
        node_name = (meta.get("annotations") or {}).get(SELECTED_NODE, "")
        if waits and not node_name:
            return  # waits for the scheduler to choose a node
        if _volume_for(store, claim) is not None:
            return
        terms = _node_terms(store, node_name) if node_name else None
        self._provision(store, claim, provisioner, terms)

    def _provision(self, store: ObjectStore, claim: Object, provisioner: str, terms: list[Object] | None) -> None:
        meta, spec = claim["metadata"], claim.get("spec") or {}
        annotations = dict(meta.get("annotations") or {})
        if annotations.get(STORAGE_PROVISIONER) != provisioner:
            # first the claim says who provisions it (the PV controller's step); that change provisions
            annotations[STORAGE_PROVISIONER] = provisioner
            store.patch(
                resources.PERSISTENTVOLUMECLAIMS,
                meta["name"],
                "application/merge-patch+json",
                {"metadata": {"annotations": annotations, "resourceVersion": meta["resourceVersion"]}},
                namespace=meta["namespace"],
            )
            return
        volume_spec: Object = {
            "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "storageClassName": spec.get("storageClassName"),
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": _claim_ref(claim),
        }
        if terms is not None:
            volume_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
        body = {
            "metadata": {"name": f"pvc-{claim['metadata']['uid']}", "annotations": {PROVISIONED_BY: provisioner}},
            "spec": volume_spec,
        }
        store.create(resources.PERSISTENTVOLUMES, body)  # its change binds the claim (_volume_changed)

    def _claim_names_volume(self, store: ObjectStore, claim: Object, volume_name: str) -> None:
        """A claim made with `spec.volumeName` (pre-bound by its author): the volume is bound to it."""
        if (claim.get("status") or {}).get("phase") == "Bound":
            return
        try:
            volume = store.get(resources.PERSISTENTVOLUMES, volume_name)
        except ApiError:
            return  # stays Pending until the volume exists
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        meta = claim["metadata"]
        if ref.get("name") and (ref.get("name"), ref.get("namespace") or "default") != (
            meta["name"],
            meta["namespace"],
        ):
            return  # the volume is another claim's
        if ref.get("uid") != meta["uid"]:
            spec = {**(volume.get("spec") or {}), "claimRef": _claim_ref(claim)}
            store.replace(resources.PERSISTENTVOLUMES, volume_name, {**volume, "spec": spec})  # binds the claim
        else:
            self._volume_changed(store, volume)

    def _volume_changed(self, store: ObjectStore, volume: Object) -> None:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if not ref.get("name"):
            if not (volume.get("status") or {}).get("phase"):
                _set_phase(store, resources.PERSISTENTVOLUMES, volume, "Available")
            return
        if volume["metadata"].get("deletionTimestamp"):
            return
        try:
            claim = store.get(resources.PERSISTENTVOLUMECLAIMS, ref["name"], ref.get("namespace") or "default")
        except ApiError:
            return
        if ref.get("uid") and ref["uid"] != claim["metadata"]["uid"]:
            return  # the claim it was made for is gone; another took its name
        volume_name = volume["metadata"]["name"]
        bound_elsewhere = (claim.get("spec") or {}).get("volumeName") not in (None, "", volume_name)
        if bound_elsewhere:
            return
        if (claim.get("status") or {}).get("phase") != "Bound" and claim["metadata"]["uid"] not in self._binding:
            self._binding.add(claim["metadata"]["uid"])
            try:
                _bind_claim(store, claim, volume)
            finally:
                self._binding.discard(claim["metadata"]["uid"])
        if (volume.get("status") or {}).get("phase") != "Bound":
            _set_phase(store, resources.PERSISTENTVOLUMES, volume, "Bound")


def _set_phase(store: ObjectStore, rtype: resources.ResourceType, obj: Object, phase: str) -> None:
    meta = obj["metadata"]
    namespace = meta.get("namespace") if rtype.namespaced else None
    body = {"metadata": {"name": meta["name"]}, "status": {**(obj.get("status") or {}), "phase": phase}}
    store.replace(rtype, meta["name"], body, namespace=namespace, status_only=True)


def _bind_claim(store: ObjectStore, claim: Object, volume: Object) -> None:
    meta = claim["metadata"]
    annotations = {**(meta.get("annotations") or {}), BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}
    spec = {**(claim.get("spec") or {}), "volumeName": volume["metadata"]["name"]}
    updated = store.replace(
        resources.PERSISTENTVOLUMECLAIMS,
        meta["name"],
        {**claim, "metadata": {**meta, "annotations": annotations}, "spec": spec},
        namespace=meta["namespace"],
    )
    volume_spec = volume.get("spec") or {}
    status = {
        "phase": "Bound",
        "accessModes": list(volume_spec.get("accessModes") or []),
        "capacity": dict(volume_spec.get("capacity") or {}),
    }
    store.replace(
        resources.PERSISTENTVOLUMECLAIMS,
        meta["name"],
        {"metadata": {"name": meta["name"]}, "status": status},
        namespace=updated["metadata"]["namespace"],
        status_only=True,
    )


def _claim_ref(claim: Object) -> Object:
    meta = claim["metadata"]
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }


def _volume_for(store: ObjectStore, claim: Object) -> Object | None:
    """A volume already made for (or pre-bound to) this claim."""
    uid = claim["metadata"]["uid"]
    for volume in store.list(resources.PERSISTENTVOLUMES)[0]:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        if ref.get("uid") == uid or (
            ref.get("name") == claim["metadata"]["name"] and ref.get("namespace") == claim["metadata"]["namespace"]
        ):
            return volume
    return None


def _node_terms(store: ObjectStore, node_name: str) -> list[Any]:
    """The selected node's topology, as a CSI driver reports it: its zone, else the node itself."""
    try:
        labels = store.get(resources.NODES, node_name)["metadata"].get("labels") or {}
    except ApiError:
        labels = {}
    if ZONE_LABEL in labels:
        key, value = ZONE_LABEL, labels[ZONE_LABEL]
    else:
        key, value = HOSTNAME_LABEL, labels.get(HOSTNAME_LABEL, node_name)
    return [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]
