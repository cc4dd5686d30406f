"""DRA (`dra`): a pod's ResourceClaims allocated and reserved for it before its Binding.

What kube-scheduler does in its PreBind step, written by services/binder/claims.py. The claims are
a pod's, not a node's: a placement that carries claims has them allocated whatever its node's
mechanism, and a `dra` node's pod without claims needs nothing besides its Binding.
"""

from __future__ import annotations

from kubernetes_asyncio import client

from schemas.events import PlacementEvent
from services.binder.claims import ClaimWriter
from services.binder.enforcers.base import ApiCall, BinderParts, Enforcer, NotBound


class DraEnforcer(Enforcer):
    def __init__(self, parts: BinderParts) -> None:
        self._claims = parts.claims or ClaimWriter(
            client.ResourceV1Api(parts.core.api_client),  # type: ignore[attr-defined]  # the stubs omit it
            request_timeout=parts.policy.request_timeout_seconds,
        )

    def applies(self, placement: PlacementEvent) -> bool:
        return bool(placement.claims)

    async def before_binding(self, placement: PlacementEvent, call: ApiCall) -> NotBound | None:
        """The kubelet runs the pod only once its claims are allocated and reserved: so before the Binding."""
        refused = await self._claims.allocate(placement, call)
        return None if refused is None else NotBound(outcome=refused.outcome, reason=refused.reason)
