"""A pod's ResourceClaims allocated on the node the engine chose (or the next that fits), as kube-scheduler does.

Every claim allocated in the cluster (status.allocation) holds its devices. A claim of
the pod that is allocated already keeps its allocation, and then the node must be one
its node selector allows. When no claim can be read, or none of the nodes can hold the
claims, the answer is kube-scheduler's reason:

    pod "<ns>/<pod>": ResourceClaim not created yet          (a template's claim, not created)
    resourceclaim.resource.k8s.io "<name>" not found          (a named claim that does not exist)
    resourceclaim <ns>/<name> is being deleted
    resourceclaim not available on the node                   (allocated for other nodes)
    cannot allocate all claims
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from engine import Decision, NodeState, NodeVerdict
from engine.node.dra import (
    AllocationError,
    AllocationInput,
    AllocationResult,
    CelPrograms,
    Features,
    NodeView,
    ResourceClaim,
    allocate,
    allocated_devices,
    consumed_capacity,
)
from engine.node.dra.pools import selector_matches
from engine.node.dra.taint_rules import with_taint_rules
from engine.node.dra.topology import link_score
from topoplace.cluster_objects.dra import DraObjects, PodClaims

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"


class ClaimsOutcome(msgspec.Struct, frozen=True, kw_only=True):
    node: str | None
    reason: str = ""
    claims: tuple[dict[str, Any], ...] = ()  # {"namespace", "name", "allocation": status.allocation}


def _resolve(pod: PodClaims, dra: DraObjects) -> list[ResourceClaim] | str:
    claims = []
    for ref in pod.refs:
        if ref.claim_name is None:
            if ref.template is not None:
                return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
            where = f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.name}"'
            return f"{where}: none of the supported fields are set"
        claim = dra.claims.get(f"{pod.namespace}/{ref.claim_name}")
        if claim is None:
            return f'resourceclaim.resource.k8s.io "{ref.claim_name}" not found'
        if claim.metadata.deletion_timestamp is not None:
            return f"resourceclaim {pod.namespace}/{ref.claim_name} is being deleted"
        claims.append(claim)
    return claims


def _order(decision: Decision) -> list[str]:
    """The chosen node, then the other fitting nodes best first (when no device was chosen for the pod)."""
    if decision.node is None:
        return []
    others = [] if decision.devices else [v for v in decision.alternatives if v.fits]
    return [decision.node, *(v.node for v in sorted(others, key=lambda v: (-v.score, v.node)))]


def _on_node(
    node: NodeState, claims: list[ResourceClaim], given: AllocationInput, programs: CelPrograms
) -> list[AllocationResult] | str:
    view = NodeView(name=node.name, labels=node.labels)
    for claim in claims:
        allocation = claim.status.allocation
        selector = allocation.node_selector if allocation is not None else None
        if selector is not None and not selector_matches(selector, view):
            return NOT_AVAILABLE
    pending = [c for c in claims if c.status.allocation is None]
    found = allocate(view, pending, given, programs, score=link_score(node, given.slices)) if pending else ()
    if found is None:
        return CANNOT_ALLOCATE
    fresh = iter(found)
    return [c.status.allocation if c.status.allocation is not None else next(fresh) for c in claims]


def place_claims(
    decision: Decision,
    pod: PodClaims,
    dra: DraObjects,
    nodes: Sequence[NodeState],
    programs: CelPrograms,
    features: Features | None = None,
    extra: Sequence[ResourceClaim] = (),
) -> ClaimsOutcome:
    """The node the pod's claims can be allocated on (the engine's choice first), and their allocations.
    `extra`: claims the scheduler makes for the pod (its extended resources backed by DRA), after its own.

    Raises ValueError (an AllocationError) when allocation cannot proceed: a missing class, a broken selector."""
    resolved = _resolve(pod, dra)
    if isinstance(resolved, str):
        return ClaimsOutcome(node=None, reason=resolved)
    claims = [*resolved, *extra]
    if decision.node is None:
        return ClaimsOutcome(node=None, reason=decision.reason)
    given = AllocationInput(
        slices=with_taint_rules(dra.slices, dra.taint_rules),
        classes=dra.classes,
        allocated=allocated_devices(list(dra.claims.values())),
        consumed=consumed_capacity(list(dra.claims.values())),
        features=features if features is not None else Features(),
    )
    by_name = {n.name: n for n in nodes}
    reason = CANNOT_ALLOCATE
    for name in _order(decision):
        try:
            found = _on_node(by_name[name], claims, given, programs)
        except AllocationError as exc:
            raise AllocationError(f"node {name}: {exc}") from None
        if isinstance(found, str):
            reason = found if reason == CANNOT_ALLOCATE else reason
            continue
        answers = tuple(
            {
                "namespace": c.metadata.namespace or pod.namespace,
                "name": c.metadata.name,
                "allocation": msgspec.to_builtins(a),
            }
            for c, a in zip(claims, found, strict=True)
        )
        return ClaimsOutcome(node=name, claims=answers)
    return ClaimsOutcome(node=None, reason=reason)


def decided_with(decision: Decision, outcome: ClaimsOutcome) -> tuple[Decision, list[dict[str, Any]]]:
    """The engine's decision as the claims leave it: on the node they were allocated on, or on none."""
    if outcome.node == decision.node:
        return decision, list(outcome.claims)
    others = [v for v in decision.alternatives if v.node != outcome.node]
    if decision.node is not None:  # the engine's choice cannot hold the claims
        others.insert(0, NodeVerdict(node=decision.node, fits=False, reasons=(outcome.reason or CANNOT_ALLOCATE,)))
    if outcome.node is None:
        failed = msgspec.structs.replace(decision, node=None, devices=(), alternatives=tuple(others))
        return msgspec.structs.replace(failed, reason=outcome.reason), []
    score = next((v.score for v in decision.alternatives if v.node == outcome.node), 0.0)
    moved = msgspec.structs.replace(decision, node=outcome.node, score=score, alternatives=tuple(others))
    return moved, list(outcome.claims)
