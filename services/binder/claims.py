"""What kube-scheduler does to a pod's ResourceClaims before it binds the pod (DRA, resource.k8s.io/v1).

Per claim of the placement, in order:

1. read the claim; gone, or re-created under the same name (another uid): the placement is stale;
2. add the finalizer `resource.kubernetes.io/delete-protection` (an update of the claim), so the
   claim cannot vanish while allocated;
3. check the chosen devices against the binder's watch of every ResourceClaim (claim_watch): a
   device another claim's allocation names, of any scheduler, or that an allocation of ours in
   flight names, is a CONFLICT naming the device and the other claim, and nothing is written;
4. write `status.allocation` (the chosen devices with the config the allocator copied, source
   FromClass or FromClaim, and a node selector for the node) and
   `status.reservedFor` (the pod) in one update of the status subresource.

Once every claim is allocated and reserved, devices published with `bindingConditions` are
waited for (binding_conditions.py): the Binding goes out only once the claim's status.devices
report them True; a failure condition True, or BINDING_TIMEOUT_S, fails the placement.

Every write carries the resourceVersion read, so a concurrent writer makes it answer 409, and
the claim is read again and the step judged afresh (at most MAX_ROUNDS reads).

A claim already allocated to the same devices and reserved for the pod is done (a retry of
ours). A claim allocated otherwise is a CONFLICT, unless it is reserved for this pod alone: then
it is an earlier decision of ours for the pod, which is taken back (allocation cleared) and
replaced. The kubelet runs the pod only once its claims are allocated and reserved for it, so
the Binding is created after this, never before.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from schemas.dra import DELETE_PROTECTION, ClaimAllocation
from schemas.events import BindingOutcome, PlacementEvent
from services.binder.binding_conditions import BINDING_TIMEOUT_S, await_binding_conditions
from services.binder.claim_watch import AllocatedDevices
from services.binder.metrics import CLAIM_COLLISIONS

Call = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[bytes]]
MAX_ROUNDS = 8  # reads (each followed by one write) before giving up: 3 writes, the rest for 409s

Object = dict[str, Any]


class ClaimOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """Why the claims stop the binding (the pod is not bound)."""

    outcome: BindingOutcome
    reason: str


def allocation_body(node: str, claim: ClaimAllocation) -> Object:
    """status.allocation for the claim's devices on `node`: the allocator's whole (config with its
    source FromClass or FromClaim, shares, tolerations) when the decision carries it."""
    on_node = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    if claim.allocation is not None:
        whole: Object = msgspec.to_builtins(claim.allocation)
        if claim.allocation.node_selector is None:
            whole["nodeSelector"] = on_node
        return whole
    return {
        "devices": {
            "results": [
                {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device} for r in claim.results
            ]
        },
        "nodeSelector": on_node,
    }


def _results(allocation: Object | None) -> list[tuple[str, str, str, str]]:
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return sorted((r.get("request"), r.get("driver"), r.get("pool"), r.get("device")) for r in results)


class ClaimWriter:
    """Allocates and reserves a placement's claims through resource.k8s.io/v1."""

    def __init__(
        self,
        api: client.ResourceV1Api,
        *,
        request_timeout: float,
        allocated: AllocatedDevices | None = None,
        binding_timeout: float = BINDING_TIMEOUT_S,
    ) -> None:
        """`allocated`: the devices every claim's allocation takes, from the binder's watch; None: no
        view of the cluster's claims to check against (a writer on its own, in tests)."""
        self._api = api
        self._timeout = request_timeout
        self._allocated = allocated
        self._binding_timeout = binding_timeout

    async def allocate(self, placement: PlacementEvent, call: Call) -> ClaimOutcome | None:
        """Allocate and reserve every claim of the placement, then wait for the devices' binding
        conditions (binding_conditions.py); None when all are done."""
        for claim in placement.claims:
            found = await self._allocate_one(placement, claim, call)
            if found is not None:
                return found

        async def read(claim: ClaimAllocation) -> Object | None:
            return await self._read(claim, call)

        failed = await await_binding_conditions(placement.claims, read, timeout=self._binding_timeout)
        return None if failed is None else ClaimOutcome(outcome=BindingOutcome.FAILED, reason=failed)

    async def _allocate_one(self, placement: PlacementEvent, claim: ClaimAllocation, call: Call) -> ClaimOutcome | None:
        who = f"ResourceClaim {claim.namespace}/{claim.name}"
        for _ in range(MAX_ROUNDS):
            current = await self._read(claim, call)
            if current is None:
                return ClaimOutcome(outcome=BindingOutcome.FAILED, reason=f"{who} does not exist")
            if claim.uid and current["metadata"].get("uid") != claim.uid:
                return ClaimOutcome(outcome=BindingOutcome.CONFLICT, reason=f"{who} was re-created since the decision")
            if _settled(placement, claim, current):
                return None
            try:
                verdict = await self._step(placement, claim, current, call)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                continue  # someone wrote the claim meanwhile: judge it again
            if verdict is not None:
                return verdict
        return ClaimOutcome(outcome=BindingOutcome.FAILED, reason=f"{who}: kept changing ({MAX_ROUNDS} rounds)")

    async def _step(
        self, placement: PlacementEvent, claim: ClaimAllocation, current: Object, call: Call
    ) -> ClaimOutcome | None:
        """One write towards the goal (None), or why there is none to make."""
        who = f"ResourceClaim {claim.namespace}/{claim.name}"
        meta, status = current["metadata"], current.get("status") or {}
        reserved = [r.get("uid") for r in status.get("reservedFor") or []]
        allocation = status.get("allocation")
        if meta.get("deletionTimestamp"):
            return ClaimOutcome(outcome=BindingOutcome.FAILED, reason=f"{who} is being deleted")
        if allocation is not None and _results(allocation) != _results(allocation_body(placement.node, claim)):
            if reserved and reserved != [placement.uid]:
                users = ", ".join(f"{r.get('resource')}/{r.get('name')}" for r in status.get("reservedFor") or [])
                return ClaimOutcome(
                    outcome=BindingOutcome.CONFLICT, reason=f"{who} is already allocated to other devices, for {users}"
                )
            # An earlier decision of ours for this pod (or one nobody uses): take it back first.
            await self._write_status(claim, {**current, "status": {}}, call)
            if self._allocated is not None:
                self._allocated.release(meta.get("uid", ""))
            return None
        if DELETE_PROTECTION not in (meta.get("finalizers") or []):
            finalizers = [*(meta.get("finalizers") or []), DELETE_PROTECTION]
            updated = {**current, "metadata": {**meta, "finalizers": finalizers}}
            await call(
                "add claim finalizer",
                functools.partial(
                    self._api.replace_namespaced_resource_claim,
                    claim.name,
                    claim.namespace,
                    updated,  # type: ignore[arg-type]  # a plain dict serialises as it is
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
            )
            return None
        consumer = {"resource": "pods", "name": placement.name, "uid": placement.uid}
        reservations = [r for r in status.get("reservedFor") or [] if r.get("uid") != placement.uid]
        new_status = {
            **status,
            "allocation": allocation if allocation is not None else allocation_body(placement.node, claim),
            "reservedFor": [*reservations, consumer],
        }
        if allocation is not None or self._allocated is None:  # reserving only: the devices are the claim's
            await self._write_status(claim, {**current, "status": new_status}, call)
            return None
        return await self._allocate_checked(claim, {**current, "status": new_status}, call)

    async def _allocate_checked(self, claim: ClaimAllocation, body: Object, call: Call) -> ClaimOutcome | None:
        """Write the allocation unless another claim's allocation (or one of ours in flight) names a device."""
        assert self._allocated is not None
        uid = body["metadata"].get("uid", "")
        devices = _taken(claim)
        collision = self._allocated.reserve(uid, f"{claim.namespace}/{claim.name}", devices)
        if collision is not None:
            CLAIM_COLLISIONS.inc()
            return ClaimOutcome(
                outcome=BindingOutcome.CONFLICT,
                reason=f"ResourceClaim {claim.namespace}/{claim.name}: {collision.reason()}",
            )
        try:
            await self._write_status(claim, body, call)
        except BaseException:
            self._allocated.release(uid)
            raise
        self._allocated.written(uid)
        return None

    async def _read(self, claim: ClaimAllocation, call: Call) -> Object | None:
        try:
            body = await call(
                "read claim",
                functools.partial(
                    self._api.read_namespaced_resource_claim,
                    claim.name,
                    claim.namespace,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                ),
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        found: Object = msgspec.json.decode(body)
        return found

    async def _write_status(self, claim: ClaimAllocation, body: Object, call: Call) -> None:
        await call(
            "write claim status",
            functools.partial(
                self._api.replace_namespaced_resource_claim_status,
                claim.name,
                claim.namespace,
                body,  # type: ignore[arg-type]  # a plain dict serialises as it is
                _preload_content=False,
                _request_timeout=self._timeout,
            ),
        )


def _taken(claim: ClaimAllocation) -> list[tuple[str, str, str]]:
    """The devices the allocation takes wholly: not those of adminAccess, nor a share (shareID)."""
    if claim.allocation is None:
        return [(r.driver, r.pool, r.device) for r in claim.results]
    return [
        (r.driver, r.pool, r.device)
        for r in claim.allocation.devices.results
        if not r.admin_access and r.share_id is None
    ]


def _settled(placement: PlacementEvent, claim: ClaimAllocation, current: Object) -> bool:
    """Allocated to exactly the claim's devices, reserved for the pod, and protected from deletion."""
    status = current.get("status") or {}
    return (
        DELETE_PROTECTION in (current["metadata"].get("finalizers") or [])
        and _results(status.get("allocation")) == _results(allocation_body(placement.node, claim))
        and status.get("allocation") is not None
        and placement.uid in [r.get("uid") for r in status.get("reservedFor") or []]
    )
