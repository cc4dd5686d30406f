"""DRA (`dra`): a pod's ResourceClaims allocated and reserved for it before its Binding.

What kube-scheduler does in its PreBind step, written by services/binder/claims.py. The claims are
a pod's, not a node's: a placement that carries claims has them allocated whatever its node's
mechanism, and a `dra` node's pod without claims needs nothing besides its Binding. The claim for
a pod's extended resources backed by DRA is created first (services/binder/extended_claims.py).
"""

from __future__ import annotations

from kubernetes_asyncio import client

from schemas.events import PlacementEvent
from services.binder.claims import ClaimWriter
from services.binder.enforcers.base import ApiCall, BinderParts, Enforcer, NotBound
from services.binder.extended_claims import ExtendedClaims


class DraEnforcer(Enforcer):
    def __init__(self, parts: BinderParts) -> None:
        api = client.ResourceV1Api(parts.core.api_client)  # type: ignore[attr-defined]  # the stubs omit it
        timeout = parts.policy.request_timeout_seconds
        self._claims = parts.claims or ClaimWriter(api, request_timeout=timeout)
        self._extended = ExtendedClaims(parts.core, api, request_timeout=timeout)

    def applies(self, placement: PlacementEvent) -> bool:
        return bool(placement.claims)

    async def before_binding(self, placement: PlacementEvent, call: ApiCall) -> NotBound | None:
        """The kubelet runs the pod only once its claims are allocated and reserved: so before the Binding.
        A claim for the pod's extended resources (KEP-5004) is created first, and named in its status after."""
        named = await self._extended.created(placement, call)
        try:
            refused = await self._claims.allocate(named, call)
        except Exception:  # an API error: the created claim is not to hold devices meanwhile
            await self._extended.forget(named, call)
            raise
        if refused is not None:
            await self._extended.forget(named, call)
            return NotBound(outcome=refused.outcome, reason=refused.reason)
        await self._extended.record(named, call)
        return None
