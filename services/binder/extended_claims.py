"""The claim kube-scheduler creates for a pod's extended resources backed by DRA (KEP-5004).

A placement's claim with `extended` set does not exist yet. Before the claims are allocated
(claims.py), it is created as kube-scheduler creates it: `generateName` `<pod>-extended-resources-`,
the annotation `resource.kubernetes.io/extended-resource-claim: "true"`, the pod as its controlling
owner (so the garbage collector deletes it with the pod), the requests the placer chose. One the pod
owns already (an earlier try) is used again when its requests are the same, else deleted first.
Once every claim is allocated and reserved, the pod's `status.extendedResourceClaimStatus` names
the claim and maps each container's resource to its request (the kubelet reads it), then the
Binding goes out. When the claims cannot be allocated, the created claim is deleted (its finalizer
taken off first), as kube-scheduler's Unreserve does, so that no device stays held by it.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from engine.node.dra.extended import EXTENDED_CLAIM_ANNOTATION
from schemas.dra import DELETE_PROTECTION, ClaimAllocation, ExtendedClaimRequest
from schemas.dra_objects import PodExtendedResourceClaimStatus, ResourceClaimSpec
from schemas.events import PlacementEvent
from services.binder.claims import Call

Object = dict[str, Any]
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"  # as conditions.py patches a pod's status


def claim_body(placement: PlacementEvent, made: ExtendedClaimRequest) -> Object:
    """The ResourceClaim to create, owned by the pod, as kube-scheduler writes it."""
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": placement.name,
        "uid": placement.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta = {
        "generateName": made.generate_name,
        "namespace": placement.namespace,
        "annotations": dict(made.annotations),
        "ownerReferences": [owner],
    }
    spec = msgspec.to_builtins(made.spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": spec}


def status_patch(placement: PlacementEvent) -> Object | None:
    """The pod's status.extendedResourceClaimStatus for its created claim; None when it has none."""
    made = next((c for c in placement.claims if c.extended is not None), None)
    if made is None or made.extended is None:
        return None
    status = PodExtendedResourceClaimStatus(
        resource_claim_name=made.name, request_mappings=made.extended.request_mappings
    )
    return {"metadata": {"uid": placement.uid}, "status": {"extendedResourceClaimStatus": msgspec.to_builtins(status)}}


def _owned_by(claim: Object, pod_uid: str) -> bool:
    meta = claim.get("metadata") or {}
    if (meta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) != "true":
        return False
    return any(o.get("uid") == pod_uid and o.get("controller") for o in meta.get("ownerReferences") or [])


class ExtendedClaims:
    """Creates, names and, on failure, deletes a placement's extended-resource claim."""

    def __init__(self, core: client.CoreV1Api, api: client.ResourceV1Api, *, request_timeout: float) -> None:
        self._core, self._api, self._timeout = core, api, request_timeout

    async def created(self, placement: PlacementEvent, call: Call) -> PlacementEvent:
        """The placement with its extended-resource claim created (or the pod's own, reused) and named."""
        if not any(c.extended is not None for c in placement.claims):
            return placement
        claims = [await self._made(placement, c, call) if c.extended is not None else c for c in placement.claims]
        return msgspec.structs.replace(placement, claims=tuple(claims))

    async def _made(self, placement: PlacementEvent, claim: ClaimAllocation, call: Call) -> ClaimAllocation:
        assert claim.extended is not None
        for existing in await self._owned(placement, call):
            spec = msgspec.convert(existing.get("spec") or {}, ResourceClaimSpec)
            if spec == claim.extended.spec and not (existing["metadata"].get("deletionTimestamp")):
                meta = existing["metadata"]
                return msgspec.structs.replace(claim, name=meta["name"], uid=meta.get("uid", ""))
            await self.delete(claim.namespace, existing["metadata"]["name"], call)
        body = await call(
            "create extended resource claim",
            functools.partial(
                self._api.create_namespaced_resource_claim,
                placement.namespace,
                claim_body(placement, claim.extended),  # type: ignore[arg-type]  # a plain dict serialises as it is
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
        )
        meta = msgspec.json.decode(body)["metadata"]
        return msgspec.structs.replace(claim, name=meta["name"], uid=meta.get("uid", ""))

    async def _owned(self, placement: PlacementEvent, call: Call) -> list[Object]:
        body = await call(
            "list claims",
            functools.partial(
                self._api.list_namespaced_resource_claim,
                placement.namespace,
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
        )
        items: list[Object] = msgspec.json.decode(body).get("items") or []
        return [c for c in items if _owned_by(c, placement.uid)]

    async def record(self, placement: PlacementEvent, call: Call) -> None:
        """Write the pod's status.extendedResourceClaimStatus (before the Binding, as kube-scheduler does)."""
        patch = status_patch(placement)
        if patch is None:
            return
        await call(
            "patch pod extended resource claim status",
            functools.partial(
                self._core.patch_namespaced_pod_status,
                placement.name,
                placement.namespace,
                patch,
                _content_type=STRATEGIC_MERGE_PATCH,  # type: ignore[call-arg]  # the runtime takes it; the stub lacks it
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
        )

    async def forget(self, placement: PlacementEvent, call: Call) -> None:
        """Delete the placement's created claim: it is not to hold devices for a pod not bound."""
        for claim in placement.claims:
            if claim.extended is not None and claim.name:
                await self.delete(claim.namespace, claim.name, call)

    async def delete(self, namespace: str, name: str, call: Call) -> None:
        """Take the claim's delete-protection finalizer off, then delete it (gone already: done)."""
        try:
            current = msgspec.json.decode(
                await call(
                    "read claim",
                    functools.partial(
                        self._api.read_namespaced_resource_claim,
                        name,
                        namespace,
                        _preload_content=False,
                        _request_timeout=self._timeout,
                    ),
                )
            )
            finalizers = [f for f in current["metadata"].get("finalizers") or [] if f != DELETE_PROTECTION]
            if finalizers != (current["metadata"].get("finalizers") or []):
                current["metadata"]["finalizers"] = finalizers
                await call(
                    "remove claim finalizer",
                    functools.partial(
                        self._api.replace_namespaced_resource_claim,
                        name,
                        namespace,
                        current,
                        _preload_content=False,
                        _request_timeout=self._timeout,
                    ),
                )
            await call(
                "delete extended resource claim",
                functools.partial(
                    self._api.delete_namespaced_resource_claim,
                    name,
                    namespace,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
