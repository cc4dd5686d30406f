"""A pod's ResourceClaims allocated node by node by the engine's structured allocator; pure.

For claims read whole (`PodClaim.spec`: every request with firstAvailable, tolerations,
capacity and adminAccess, every constraint and config), as kube-scheduler's DRA plugin does:

1. the allocator (engine/node/dra: DeviceClass selectors and config, CEL, taints of the slices
   and of DeviceTaintRules, counters,
   consumable capacity, pool generations, bounded search) is asked, node by node, whether the
   claims can be allocated there, against every device that other claims hold: the allocated
   claims of `resources.claims` (ours and kube-scheduler's) and the claims of our own decisions
   not yet written (the pod's own claims do not count against it);
2. the engine decides the pod's other requests among the nodes that can (a required node
   affinity on their names), as for any pod;
3. on the chosen node the claims are allocated again with topology leading where the claims
   leave a choice (the best link score of the GPUs chosen, devices of different drivers on
   one PCIe root), and each claim's status.allocation (results, config with its source) goes
   into the decision; the chosen GPUs the node agent knows (by UUID) are the decision's
   devices, so the view holds them as it holds any pod's.

A claim already allocated (an earlier decision for the pod) keeps its allocation and pins its
node. No node can: kube-scheduler's "cannot allocate all claims".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec

from engine import Decision, NodeState, PodRequest, RequestError
from engine.node.dra import (
    AllocationError,
    AllocationInput,
    AllocationResult,
    CelPrograms,
    DeviceClass,
    DeviceId,
    Features,
    NodeView,
    ResourceClaim,
    ResourceSlice,
    allocate,
    allocated_devices,
    consumed_capacity,
)
from engine.node.dra.extended import ExtendedClaim
from engine.node.dra.model import (
    DeviceRequestAllocationResult,
    DeviceTaintRule,
    ObjectMeta,
    ResourceClaimSpec,
    ResourceClaimStatus,
)
from engine.node.dra.taint_rules import with_taint_rules
from engine.node.dra.topology import link_score
from schemas.dra import ClaimAllocation, DeviceKey, DeviceResult, ExtendedClaimRequest, PodClaim
from schemas.events import AllocatedClaimEvent, DeviceAssignment, ResourceSliceEvent
from schemas.kube import (
    NODE_NAME_FIELD,
    Affinity,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from schemas.quantity import QuantityError, parse_quantity
from services.placer.claims import taken_text

CANNOT_ALLOCATE = "cannot allocate all claims"  # kube-scheduler's words
DEFAULT_FEATURES = Features()  # the newest release's gates, as the placer's allocator reads them by default


class DraCluster(msgspec.Struct, frozen=True, kw_only=True):
    """What the allocator reads of the view: every slice, class and allocation, and our own
    decisions' claims not yet seen allocated."""

    slices: tuple[ResourceSliceEvent, ...]
    classes: Mapping[str, DeviceClass]
    allocated: tuple[AllocatedClaimEvent, ...]
    taint_rules: tuple[DeviceTaintRule, ...] = ()
    assumed: tuple[ClaimAllocation, ...] = ()


def read_whole(claims: tuple[PodClaim, ...]) -> bool:
    """Whether every claim came with its spec (a watcher of this release sends it)."""
    return bool(claims) and all(c.spec is not None for c in claims)


def engine_claims(namespace: str, claims: tuple[PodClaim, ...]) -> list[ResourceClaim]:
    return [
        ResourceClaim(
            metadata=ObjectMeta(name=c.claim_name, namespace=namespace, uid=c.claim_uid),
            spec=c.spec if c.spec is not None else ResourceClaimSpec(),
        )
        for c in claims
    ]


def held_by_others(cluster: DraCluster, own: frozenset[str], features: Features = DEFAULT_FEATURES) -> AllocationInput:
    """The slices (with DeviceTaintRules) and what every claim but `own` holds: the cluster as allocation reads it."""
    others = [e for e in cluster.allocated if e.uid not in own and not e.deleted]
    written = {e.uid for e in others if e.allocation is not None}
    # decided, not yet written: held as their allocation says (a share consumes its capacity only);
    # one the cluster already reports allocated is counted once, from the cluster
    assumed = [a for a in cluster.assumed if a.uid not in own and not (a.uid and a.uid in written)]
    as_claims = [
        ResourceClaim(
            metadata=ObjectMeta(name=name, namespace=namespace, uid=uid),
            status=ResourceClaimStatus(allocation=allocation),
        )
        for name, namespace, uid, allocation in [
            *((e.name, e.namespace, e.uid, e.allocation) for e in others),
            *((a.name, a.namespace, a.uid, a.allocation) for a in assumed),
        ]
        if allocation is not None
    ]
    taken: set[DeviceId] = set(allocated_devices(as_claims))
    # an event without its allocation whole (an older watcher) still names its devices
    taken.update(d.key for e in others if e.allocation is None for d in e.devices if not d.admin_access)
    taken.update((r.driver, r.pool, r.device) for a in assumed if a.allocation is None for r in a.results)
    slices = with_taint_rules(
        (
            ResourceSlice(metadata=ObjectMeta(name=s.name), spec=s.spec)
            for s in cluster.slices
            if s.spec is not None and not s.deleted
        ),
        cluster.taint_rules,
    )
    try:
        consumed = consumed_capacity(as_claims)
    except AllocationError as exc:
        raise RequestError("claims", str(exc)) from None
    return AllocationInput(
        slices=slices, classes=cluster.classes, allocated=frozenset(taken), consumed=consumed, features=features
    )


def _slices_by_node(given: AllocationInput) -> Callable[[str], AllocationInput]:
    """The input for one node: its own slices and those for many nodes (nodeSelector, allNodes,
    per device), so that a decision does not read every node's slices for every node."""
    local: dict[str, list[ResourceSlice]] = {}
    shared: list[ResourceSlice] = []
    for s in given.slices:
        if s.spec.node_name:
            local.setdefault(s.spec.node_name, []).append(s)
        else:
            shared.append(s)

    def of_node(name: str) -> AllocationInput:
        return msgspec.structs.replace(given, slices=(*local.get(name, ()), *shared))

    return of_node


def _pinned(claims: tuple[PodClaim, ...], cluster: DraCluster) -> dict[str, AllocatedClaimEvent]:
    """The pod's claims allocated already (an earlier decision of ours, written), by claim uid."""
    by_uid = {e.uid: e for e in cluster.allocated if not e.deleted}
    return {c.claim_uid: by_uid[c.claim_uid] for c in claims if c.claim_uid in by_uid}


def _try(
    node: NodeState,
    pending: list[ResourceClaim],
    given: AllocationInput,
    programs: CelPrograms,
    score: Callable[[list[DeviceId]], float] | None = None,
) -> tuple[AllocationResult, ...] | None:
    if not pending:
        return ()
    try:
        return allocate(NodeView(name=node.name, labels=node.labels), pending, given, programs, score=score)
    except AllocationError as exc:
        raise RequestError("claims", f"node {node.name}: {exc}") from None


def _why_not(cluster: DraCluster, own: frozenset[str], given: AllocationInput) -> str:
    """kube-scheduler's reason, and which devices of the slices other claims hold (the likely why)."""
    published = {(s.spec.driver, s.spec.pool.name, d.name) for s in given.slices for d in s.spec.devices}
    taken: dict[DeviceKey, list[AllocatedClaimEvent]] = {}
    for event in cluster.allocated:
        if event.uid in own or event.deleted:
            continue
        for d in event.devices:
            if not d.admin_access and d.key in published:
                taken.setdefault(d.key, []).append(event)
    if not taken:
        return CANNOT_ALLOCATE
    return f"{CANNOT_ALLOCATE}; {len(taken)} device(s) allocated to other claims: {taken_text(taken)}"


def only_on(base: PodRequest, names: Sequence[str]) -> PodRequest:
    """The pod's request with a required node affinity on these node names, ANDed with its own: one
    term per name and own term (matchFields names one node a term, as the API validates)."""
    affinity = base.affinity.node_affinity if base.affinity is not None else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity is not None else None
    terms = required.node_selector_terms if required is not None and required.node_selector_terms else ()
    narrowed = tuple(
        NodeSelectorTerm(
            match_expressions=term.match_expressions if term is not None else (),
            match_fields=(
                *(term.match_fields if term is not None else ()),
                NodeSelectorRequirement(key=NODE_NAME_FIELD, operator="In", values=(name,)),
            ),
        )
        for term in (terms or (None,))
        for name in names
    )
    node_affinity = NodeAffinity(
        required_during_scheduling_ignored_during_execution=NodeSelector(node_selector_terms=narrowed),
        preferred_during_scheduling_ignored_during_execution=(
            affinity.preferred_during_scheduling_ignored_during_execution if affinity is not None else ()
        ),
    )
    return msgspec.structs.replace(base, affinity=Affinity(node_affinity=node_affinity))


def place_allocated(
    base: PodRequest,
    claims: tuple[PodClaim, ...],
    cluster: DraCluster,
    nodes: Iterable[NodeState],
    place: Callable[[PodRequest], Decision],
    programs: CelPrograms,
    features: Features = DEFAULT_FEATURES,
    extra: ExtendedClaim | None = None,
) -> tuple[Decision, tuple[ClaimAllocation, ...]]:
    """The engine's decision among the nodes where the claims can be allocated, and each claim's
    allocation there (none when unplaced). `features`: the DRA feature gates the allocator reads;
    `extra`: the claim to create for the pod's extended resources (KEP-5004), allocated after its own.
    Raises RequestError for claims that cannot be read (a missing DeviceClass, a broken selector), naming
    the node and the field."""
    own = frozenset(c.claim_uid for c in claims if c.claim_uid)
    given = held_by_others(cluster, own, features)
    pinned = _pinned(claims, cluster)
    pinned_nodes = {e.node for e in pinned.values()}
    pending = [
        c for c, p in zip(engine_claims(base.namespace, claims), claims, strict=True) if p.claim_uid not in pinned
    ] + ([extra.claim] if extra is not None else [])
    by_name = {n.name: n for n in nodes if not pinned_nodes or n.name in pinned_nodes}
    of_node = _slices_by_node(given)
    feasible = [name for name in sorted(by_name) if _try(by_name[name], pending, of_node(name), programs) is not None]
    if not feasible:
        return Decision(node=None, reason=_why_not(cluster, own, given)), ()
    decision = place(only_on(base, feasible))
    if decision.node is None:
        return decision, ()
    node = by_name[decision.node]
    on_node = of_node(node.name)
    found = _try(node, pending, on_node, programs, score=link_score(node, on_node.slices))
    if found is None:  # the search is deterministic: the node that could still can
        return Decision(node=None, reason=CANNOT_ALLOCATE), ()
    fresh = iter(found)
    out = []
    for claim in claims:
        held = pinned.get(claim.claim_uid)
        allocation = held.allocation if held is not None else next(fresh)
        out.append(_claim_allocation(base.namespace, claim, allocation, held))
    if extra is not None:
        out.append(_extended_allocation(base.namespace, extra, next(fresh)))
    devices = known_gpus(node, on_node.slices, out)
    return msgspec.structs.replace(decision, devices=(*decision.devices, *devices)), tuple(out)


def _claim_allocation(
    namespace: str, claim: PodClaim, allocation: AllocationResult | None, held: AllocatedClaimEvent | None
) -> ClaimAllocation:
    if allocation is None:  # allocated by an older watcher's account: its devices only
        results = (
            tuple(DeviceResult(request="", driver=d.driver, pool=d.pool, device=d.device) for d in held.devices)
            if held is not None
            else ()
        )
        return ClaimAllocation(namespace=namespace, name=claim.claim_name, uid=claim.claim_uid, results=results)
    return ClaimAllocation(
        namespace=namespace,
        name=claim.claim_name,
        uid=claim.claim_uid,
        results=tuple(
            DeviceResult(request=r.request, driver=r.driver, pool=r.pool, device=r.device)
            for r in allocation.devices.results
        ),
        allocation=allocation,
    )


def _extended_allocation(namespace: str, made: ExtendedClaim, allocation: AllocationResult) -> ClaimAllocation:
    """The claim the binder creates for the pod's extended resources, with its allocation."""
    results = tuple(
        DeviceResult(request=r.request, driver=r.driver, pool=r.pool, device=r.device)
        for r in allocation.devices.results
    )
    request = ExtendedClaimRequest(
        generate_name=made.generate_name,
        annotations=dict(made.claim.metadata.annotations),
        spec=made.claim.spec,
        request_mappings=made.request_mappings,
    )
    return ClaimAllocation(
        namespace=namespace, name="", uid="", results=results, allocation=allocation, extended=request
    )


def known_gpus(
    node: NodeState, slices: tuple[ResourceSlice, ...], claims: list[ClaimAllocation]
) -> tuple[DeviceAssignment, ...]:
    """The allocated devices the node agent knows by UUID, whole: what the view holds for the pod."""
    by_uuid = {d.uuid: d for d in node.devices if d.uuid}
    uuids: dict[DeviceId, str] = {}
    for s in slices:
        for device in s.spec.devices:
            for name in ("uuid", f"{s.spec.driver}/uuid"):
                text = device.attributes[name].string if name in device.attributes else None
                if text:
                    uuids[(s.spec.driver, s.spec.pool.name, device.name)] = text
    held: dict[str, int] = {}  # uuid -> MiB the pod's shares of it hold; 0: the device whole
    for claim in claims:
        results = claim.allocation.devices.results if claim.allocation is not None else claim.results
        for r in results:
            if (key := (r.driver, r.pool, r.device)) in uuids and (u := uuids[key]) in by_uuid:
                mib = _share_mib(r)
                held[u] = 0 if mib == 0 or held.get(u) == 0 else held.get(u, 0) + mib
    # a share (consumable capacity) holds its memory and no cores: other shares of the device fit beside it
    return tuple(
        DeviceAssignment(index=by_uuid[u].index, uuid=u, memory_mib=mib, cores=100 if mib == 0 else 0)
        for u, mib in sorted(held.items(), key=lambda item: by_uuid[item[0]].index)
    )


def _share_mib(result: DeviceResult | DeviceRequestAllocationResult) -> int:
    """MiB of memory a share of a device consumes (its consumedCapacity); 0: not a share of memory."""
    if not isinstance(result, DeviceRequestAllocationResult) or result.share_id is None:
        return 0
    text = result.consumed_capacity.get("memory") or result.consumed_capacity.get(f"{result.driver}/memory")
    try:
        return max(1, -(-int(parse_quantity(text)) // 2**20)) if text else 0
    except QuantityError:
        return 0
