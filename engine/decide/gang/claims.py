"""A gang's members' ResourceClaims, allocated jointly with the gang's choice; pure.

    each member's claims      from its templates or named; a claim named by several members (or already
                              allocated) is shared: allocated once, and every member using it must land
                              where its devices are reachable (the allocation's node selector: node-local
                              devices, that node; network-attached ones, wherever their slices allow)
    slots                     a node takes a member only as often as its devices hold the member's own
                              claims one after the other (shared ones once), and only where the shared
                              claims already allocated are reachable; a node that cannot hold them takes
                              none ("cannot allocate all claims", as kube-scheduler's DRA filter says)
    after the plan            the members' claims allocated on their nodes in rank order, each holding
                              its devices from the next; when a node cannot hold the next member (two
                              shapes' members counted the same devices) that node's slots for the shape
                              are cut to what it held, and when a shared claim allocated for its first
                              member is out of reach of another, that allocation is fixed: the search
                              runs again (at most MAX_ROUNDS times)
    a ComputeDomain           (NVIDIA's resource.nvidia.com ComputeDomain: its channel claim template)
                              keeps the gang inside one NVLink clique, as its IMEX channel needs; the
                              driver does not keep them there itself (dra-driver-nvidia-gpu #804)

Limits: a shared claim is tried at the allocation its first member's node gives it, not at every
allocation it could have; a member's claims are allocated on its node with the link score leading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import msgspec

from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree
from engine.core.model import NodeState
from engine.decide.gang.request import ClaimAllocation, GangDecision, MemberPlacement
from engine.decide.gang.slots import Shape
from engine.node.answer import NodeFit
from engine.node.dra import (
    AllocationInput,
    AllocationResult,
    CelPrograms,
    NodeView,
    ResourceClaim,
    allocate,
    allocated_devices,
    consumed_capacity,
)
from engine.node.dra.model import ObjectMeta, ResourceClaimStatus
from engine.node.dra.pools import selector_matches
from engine.node.dra.topology import link_score

MAX_ROUNDS = 8  # gang searches for one decision: each round cuts a node's slots or fixes a shared claim
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"


class GangClaims(msgspec.Struct, frozen=True, kw_only=True):
    """What the gang search reads of DRA: each member's claims (by uid, in its pod's order) and the devices."""

    members: Mapping[str, tuple[ResourceClaim, ...]]
    given: AllocationInput  # slices, classes, and what the cluster's allocated claims hold
    compute_domain: str = ""  # "namespace/name" of the ComputeDomain whose channel they claim: one clique


def claim_key(claim: ResourceClaim) -> str:
    return f"{claim.metadata.namespace or 'default'}/{claim.metadata.name}"


def _holding(given: AllocationInput, results: Sequence[AllocationResult]) -> AllocationInput:
    """`given` with the devices (and the shares' capacity) of `results` held."""
    held = [ResourceClaim(metadata=ObjectMeta(name="held"), status=ResourceClaimStatus(allocation=r)) for r in results]
    consumed: dict[tuple[str, str, str], dict[str, Fraction]] = {k: dict(v) for k, v in given.consumed.items()}
    for device, amounts in consumed_capacity(held).items():
        into = consumed.setdefault(device, {})
        for name, value in amounts.items():
            into[name] = into.get(name, Fraction(0)) + value
    return msgspec.structs.replace(given, allocated=given.allocated | allocated_devices(held), consumed=consumed)


class Refinement(msgspec.Struct, frozen=True, kw_only=True):
    """What the next round changes: a node's slots for members of one claim signature, or a fixed shared claim."""

    cap: tuple[bytes, str, int] | None = None  # (signature, node, members it holds)
    fixed: tuple[str, AllocationResult] | None = None  # (claim key, the allocation it keeps)


class ClaimRules:
    """One gang's claims for one round of the search: fixed shared claims and cut slots (see the docstring)."""

    def __init__(
        self,
        claims: GangClaims,
        programs: CelPrograms,
        fixed: Mapping[str, AllocationResult] | None = None,
        caps: Mapping[tuple[bytes, str], int] | None = None,
    ) -> None:
        self.claims, self.programs = claims, programs
        self.fixed = dict(fixed or {})
        self.caps = dict(caps or {})
        self.given = _holding(claims.given, list(self.fixed.values()))
        users: dict[str, int] = {}
        for member in claims.members.values():
            for key in {claim_key(c) for c in member}:
                users[key] = users.get(key, 0) + 1
        self.shared = frozenset(k for k, n in users.items() if n > 1)
        self._caps_of: dict[tuple[bytes, str, int], int] = {}
        self._signatures: dict[str, bytes] = {}

    def refined(self, change: Refinement) -> ClaimRules:
        fixed, caps = dict(self.fixed), dict(self.caps)
        if change.fixed is not None:
            fixed[change.fixed[0]] = change.fixed[1]
        if change.cap is not None:
            signature, node, most = change.cap
            caps[(signature, node)] = most
        return ClaimRules(self.claims, self.programs, fixed, caps)

    def allocation_of(self, claim: ResourceClaim) -> AllocationResult | None:
        """Its allocation already made: in the cluster, or fixed by an earlier round."""
        return claim.status.allocation or self.fixed.get(claim_key(claim))

    def signature(self, uid: str) -> bytes:
        """What a member's claims ask, so that members asking alike share a shape: own claims by spec,
        shared and allocated ones by name."""
        found = self._signatures.get(uid)
        if found is not None:
            return found
        parts: list[object] = []
        for claim in self.claims.members.get(uid, ()):
            key = claim_key(claim)
            named = key in self.shared or self.allocation_of(claim) is not None
            parts.append(key if named else claim.spec)
        found = self._signatures[uid] = msgspec.json.encode(parts)
        return found

    def slots(self, uid: str, node: NodeState, cap: int) -> int:
        """How many members asking as `uid` does the node holds, one after the other (at most `cap`)."""
        signature = self.signature(uid)
        found = self._caps_of.get((signature, node.name, cap))
        if found is None:
            found = self._caps_of[(signature, node.name, cap)] = self._count(uid, node, cap)
        return min(found, self.caps.get((signature, node.name), cap))

    def _count(self, uid: str, node: NodeState, cap: int) -> int:
        view = NodeView(name=node.name, labels=node.labels)
        shared: list[ResourceClaim] = []
        own: list[ResourceClaim] = []
        for claim in self.claims.members.get(uid, ()):
            allocation = self.allocation_of(claim)
            if allocation is not None:
                if allocation.node_selector is not None and not selector_matches(allocation.node_selector, view):
                    return 0
            elif claim_key(claim) in self.shared:
                shared.append(claim)
            else:
                own.append(claim)
        if not shared and not own:
            return cap
        given = self.given
        score = link_score(node, given.slices)
        found = allocate(view, [*shared, *own], given, self.programs, score=score)
        held = 0
        while found is not None:
            held += 1
            if held >= cap or not own:
                return cap if not own else held
            given = _holding(given, found)
            found = allocate(view, own, given, self.programs, score=score)
        return held

    def allocate_members(self, decision: GangDecision, nodes: Mapping[str, NodeState]) -> GangDecision | Refinement:
        """The placed members' claims allocated on their nodes (rank order), or what the next round changes."""
        given = self.given
        done: dict[str, AllocationResult] = {}
        held: dict[tuple[bytes, str], int] = {}
        members: list[MemberPlacement] = []
        for member in decision.pods:
            if member.node is None or member.running or member.uid not in self.claims.members:
                members.append(member)
                continue
            node = nodes[member.node]
            view = NodeView(name=node.name, labels=node.labels)
            claims = self.claims.members[member.uid]
            pending: list[ResourceClaim] = []
            for claim in claims:
                allocation = self.allocation_of(claim) or done.get(claim_key(claim))
                if allocation is None:
                    pending.append(claim)
                elif allocation.node_selector is not None and not selector_matches(allocation.node_selector, view):
                    return Refinement(fixed=(claim_key(claim), allocation))  # a shared claim out of reach
            signature = self.signature(member.uid)
            found = (
                allocate(view, pending, given, self.programs, score=link_score(node, given.slices)) if pending else ()
            )
            if found is None:
                return Refinement(cap=(signature, node.name, held.get((signature, node.name), 0)))
            held[(signature, node.name)] = held.get((signature, node.name), 0) + 1
            given = _holding(given, found)
            done.update((claim_key(c), a) for c, a in zip(pending, found, strict=True))
            answers = tuple(
                ClaimAllocation(
                    namespace=c.metadata.namespace or "default",
                    name=c.metadata.name,
                    allocation=self.allocation_of(c) or done[claim_key(c)],
                )
                for c in claims
            )
            members.append(msgspec.structs.replace(member, claims=answers))
        return msgspec.structs.replace(decision, pods=tuple(members))


def gave_up(decision: GangDecision, reason: str) -> GangDecision:
    """The decision with none of its pending members placed, and why."""
    pods = tuple(
        p if p.running else msgspec.structs.replace(p, node=None, devices=(), score=0.0, score_parts={}, domain=None)
        for p in decision.pods
    )
    return msgspec.structs.replace(
        decision, placed=False, partial=False, hypernode=None, tier=None, pods=pods, reason=reason
    )


def cut_by_claims(
    rules: ClaimRules,
    index: ClusterIndex,
    tree: NetworkTree,
    shapes: Sequence[Shape],
    per_node: dict[bytes, list[int]],
    fits: dict[tuple[bytes, str], tuple[NodeFit, ...]],
    misses: list[str],
) -> None:
    """Each node's slots for each shape cut to the members whose claims its devices hold (in place)."""
    for number, shape in enumerate(shapes):
        uid = shape.members[0].uid
        values = per_node[shape.key]
        for i, name in enumerate(tree.nodes):
            node = index.get(name) if values[i] else None
            if node is None:
                continue
            most = rules.slots(uid, node, values[i])
            if most >= values[i]:
                continue
            values[i] = most
            if most:
                fits[(shape.key, name)] = fits[(shape.key, name)][:most]
                continue
            fits.pop((shape.key, name), None)
            if number == 0:
                misses.append(CANNOT_ALLOCATE)
