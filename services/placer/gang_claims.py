"""A gang's members' ResourceClaims read whole, for the engine's gang search; pure.

The engine allocates them jointly with the gang's choice (engine/decide/gang/claims.py): each
member's claims on its node, a claim several members name once, reachable from each. Every device
another claim holds (ours in flight too) is taken; a member's claim allocated already (an earlier
decision of ours, written) keeps its allocation and holds the member to its node selector. Each
placed member's answer becomes its PlacementEvent's claims, and the GPUs the node agent knows among
its devices become its devices, so the view holds them as it holds any pod's. A member's claim made
from a ComputeDomain's channel template names the domain (the cluster watcher reads the domains):
the gang is kept inside one NVLink clique, as `engine place --cluster` keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine import NodeState
from engine.decide.gang import GangClaims, MemberPlacement
from engine.node.dra import Features
from engine.node.dra.model import ResourceClaim, ResourceClaimStatus, ResourceSlice
from schemas.dra import ClaimAllocation, DeviceResult
from schemas.events import DeviceAssignment, PendingPodEvent
from services.placer.dra_allocation import DEFAULT_FEATURES, DraCluster, engine_claims, held_by_others, known_gpus


def live_gang_claims(
    members: Sequence[PendingPodEvent], cluster: DraCluster, features: Features = DEFAULT_FEATURES
) -> GangClaims:
    """The members' claims (read whole) and every device other claims hold, allocated with `features` (the
    placer's DRA gates, as a single pod's claims are)."""
    own = frozenset(c.claim_uid for m in members for c in m.claims if c.claim_uid)
    allocated = {e.uid: e for e in cluster.allocated if not e.deleted and e.allocation is not None}
    by_member: dict[str, tuple[ResourceClaim, ...]] = {}
    for member in members:
        claims: list[ResourceClaim] = []
        for given, claim in zip(member.claims, engine_claims(member.namespace, member.claims), strict=True):
            held = allocated.get(given.claim_uid)
            if held is not None:
                claim = msgspec.structs.replace(claim, status=ResourceClaimStatus(allocation=held.allocation))
            claims.append(claim)
        by_member[member.uid] = tuple(claims)
    domain = next((c.compute_domain for m in members for c in m.claims if c.compute_domain), "")
    return GangClaims(members=by_member, given=held_by_others(cluster, own, features), compute_domain=domain)


def allocated_claims(cluster: DraCluster | None) -> set[str]:
    """The uids of the claims allocated in the cluster: their devices are held already."""
    if cluster is None:
        return set()
    return {e.uid for e in cluster.allocated if not e.deleted and e.allocation is not None}


def member_claims(
    pending: PendingPodEvent,
    placed: MemberPlacement,
    node: NodeState | None,
    slices: tuple[ResourceSlice, ...],
    carried: set[str],
) -> tuple[tuple[ClaimAllocation, ...], tuple[DeviceAssignment, ...]]:
    """The member's claims as its PlacementEvent carries them, and the GPUs the node agent knows among
    those of its claims no one carries yet. `carried`: the uids of the claims whose devices are held
    already (allocated in the cluster, or a gang-mate's in this decision); the member's are added. A
    claim members share holds its devices once: the binder's device ledger gives a device to one pod."""
    uids = {c.claim_name: c.claim_uid for c in pending.claims}
    claims = tuple(
        ClaimAllocation(
            namespace=c.namespace,
            name=c.name,
            uid=uids.get(c.name, ""),
            results=tuple(
                DeviceResult(request=r.request, driver=r.driver, pool=r.pool, device=r.device)
                for r in c.allocation.devices.results
            ),
            allocation=c.allocation,
        )
        for c in placed.claims
    )
    fresh = [c for c in claims if not (c.uid and c.uid in carried)]
    carried.update(c.uid for c in claims if c.uid)
    if node is None or not fresh:
        return claims, ()
    return claims, known_gpus(node, slices, fresh)
