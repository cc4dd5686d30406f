"""The parts of kube-controller-manager the test server emulates: owner-reference garbage collection
and the ResourceClaim controller's creation of claims from a pod's claim templates.

Both run synchronously on each committed change (see `Controller` in store.py), so a test sees
their effect as soon as the write that caused it returns.
"""

from __future__ import annotations

import logging
from typing import Any

from topoplace.dev.kubeapi import resources
from topoplace.dev.kubeapi.changes import ADDED, DELETED, Change, Object
from topoplace.dev.kubeapi.errors import ApiError
from topoplace.dev.kubeapi.store import ObjectStore

log = logging.getLogger(__name__)

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
_MAX_CLAIM_NAME_BASE = 57  # leaves room for five random characters in a 63-character name

DependentRef = tuple[str, str, str]  # (resource type key, namespace, name)


class GarbageCollector:
    """Deletes an object's dependents (ownerReferences naming its uid) once it is gone, unless another
    owner of theirs still exists; a dependent with finalizers gets a deletionTimestamp instead."""

    def __init__(self) -> None:
        self._dependents: dict[str, set[DependentRef]] = {}  # owner uid -> dependents

    def install(self, store: ObjectStore) -> None:
        for rtype in resources.ALL:
            for obj in store.list(rtype)[0]:
                self._index(rtype.key, obj, add=True)
        store.add_controller(self)

    def on_change(self, store: ObjectStore, change: Change) -> None:
        if change.old is not None:
            self._index(change.resource, change.old, add=False)
        if change.type != DELETED:
            self._index(change.resource, change.obj, add=True)
            return
        for ref in sorted(self._dependents.pop(change.obj["metadata"].get("uid", ""), ())):
            self._collect(store, ref, change.obj["metadata"]["uid"])

    def _index(self, resource: str, obj: Object, *, add: bool) -> None:
        owners = obj["metadata"].get("ownerReferences")
        if not owners:
            return
        ref = (resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        for owner in owners:
            uid = owner.get("uid") if isinstance(owner, dict) else None
            if not uid:
                continue
            if add:
                self._dependents.setdefault(uid, set()).add(ref)
            elif uid in self._dependents:
                self._dependents[uid].discard(ref)
                if not self._dependents[uid]:
                    del self._dependents[uid]

    def _collect(self, store: ObjectStore, ref: DependentRef, gone_uid: str) -> None:
        resource, namespace, name = ref
        try:
            dependent = store.get(resource, name, namespace or None)
            others = [
                o
                for o in dependent["metadata"].get("ownerReferences") or []
                if isinstance(o, dict) and o.get("uid") != gone_uid
            ]
            if any(_owner_exists(store, o, namespace) for o in others):
                return  # the real collector would drop the dangling reference; the dependent stays either way
            store.delete(resource, name, namespace=namespace or None)
        except ApiError as exc:
            log.debug("garbage collection of %s %s/%s: %s", resource, namespace, name, exc.message)


def _owner_exists(store: ObjectStore, owner: dict[str, Any], namespace: str) -> bool:
    group = owner.get("apiVersion", "").rpartition("/")[0]
    for rtype in resources.ALL:
        if rtype.kind == owner.get("kind") and rtype.group == group:
            try:
                found = store.get(rtype, owner.get("name", ""), namespace if rtype.namespaced else None)
            except ApiError:
                return False
            return bool(found["metadata"].get("uid") == owner.get("uid"))
    return False


class ResourceClaimController:
    """Creates the ResourceClaim of each `spec.resourceClaims[]` entry that names a template, owned by
    the pod, and records it in the pod's `status.resourceClaimStatuses`. A pod whose template does not
    exist yet is retried when the template is created."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], set[str]] = {}  # (namespace, template) -> pod names

    def install(self, store: ObjectStore) -> None:
        store.add_controller(self)

    def on_change(self, store: ObjectStore, change: Change) -> None:
        if change.type != ADDED:
            return
        if change.resource == resources.PODS.key:
            self._sync_pod(store, change.obj)
        elif change.resource == resources.RESOURCECLAIMTEMPLATES.key:
            key = (change.namespace, change.obj["metadata"]["name"])
            for pod_name in sorted(self._waiting.pop(key, ())):
                try:
                    self._sync_pod(store, store.get(resources.PODS, pod_name, change.namespace))
                except ApiError:
                    continue  # the pod went meanwhile

    def _sync_pod(self, store: ObjectStore, pod: Object) -> None:
        pod_claims = (pod.get("spec") or {}).get("resourceClaims") or []
        if not pod_claims or pod["metadata"].get("deletionTimestamp"):
            return
        namespace = pod["metadata"]["namespace"]
        done = {s.get("name") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        created: list[dict[str, str]] = []
        for pod_claim in pod_claims:
            template = pod_claim.get("resourceClaimTemplateName") if isinstance(pod_claim, dict) else None
            if not template or pod_claim.get("name") in done:
                continue
            try:
                claim = self._create_claim(store, pod, pod_claim["name"], template)
            except ApiError as exc:
                if exc.code == 404:
                    self._waiting.setdefault((namespace, template), set()).add(pod["metadata"]["name"])
                else:
                    log.warning("resource claim for pod %s/%s: %s", namespace, pod["metadata"]["name"], exc.message)
                continue
            created.append({"name": pod_claim["name"], "resourceClaimName": claim["metadata"]["name"]})
        if created:
            self._record(store, pod, created)

    def _create_claim(self, store: ObjectStore, pod: Object, claim_name: str, template_name: str) -> Object:
        namespace = pod["metadata"]["namespace"]
        template = store.get(resources.RESOURCECLAIMTEMPLATES, template_name, namespace)
        template_spec = template.get("spec") or {}
        template_meta = template_spec.get("metadata") or {}
        meta: Object = {
            "generateName": claim_name_base(pod["metadata"]["name"], claim_name),
            "annotations": {**(template_meta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: claim_name},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if template_meta.get("labels"):
            meta["labels"] = template_meta["labels"]
        body = {"metadata": meta, "spec": template_spec.get("spec") or {}}
        return store.create(resources.RESOURCECLAIMS, body, namespace=namespace)

    def _record(self, store: ObjectStore, pod: Object, created: list[dict[str, str]]) -> None:
        current = store.get(resources.PODS, pod["metadata"]["name"], pod["metadata"]["namespace"])
        status = dict(current.get("status") or {})
        by_name = {s["name"]: s for s in status.get("resourceClaimStatuses") or []}
        by_name.update({s["name"]: s for s in created})
        status["resourceClaimStatuses"] = list(by_name.values())
        store.replace(
            resources.PODS,
            current["metadata"]["name"],
            {"metadata": {"name": current["metadata"]["name"]}, "status": status},
            namespace=current["metadata"]["namespace"],
            status_only=True,
        )


def claim_name_base(pod_name: str, claim_name: str) -> str:
    """`<pod>-<claim>-`, both parts cut in proportion when too long, as the real controller does
    (its cut form has no trailing dash)."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) <= _MAX_CLAIM_NAME_BASE:
        return base
    return (
        pod_name[: len(pod_name) * _MAX_CLAIM_NAME_BASE // len(base)]
        + "-"
        + claim_name[: len(claim_name) * _MAX_CLAIM_NAME_BASE // len(base)]
    )
