"""DRA claims on the engine: which slice devices a pod's ResourceClaims may get, and which they got; pure.

A claim request of a GPU device class becomes an NVIDIA count request for the engine
(counts summed over the pod's requests), restricted by `nvidia.com/use-gpuuuid` to the
devices of the node-local ResourceSlices that match the class and the request's selectors.
With constraints[].matchAttribute, the candidates are split into groups sharing the
attribute's value and the engine decides each group; the best-scored decision wins (ties:
the first group in value order), so every chosen device shares the value.

Selectors are CEL, evaluated by the engine's DRA allocator's environment (cel-python
with Kubernetes' device variables and libraries): a selector that does not compile, or
errs on a device, makes the pod unschedulable with the request's field and the
expression.

The engine's devices are joined back with the slices by UUID (NVML's UUID is the uuid
attribute NVIDIA's DRA driver publishes), then dealt to the claims' requests by the
engine's structured allocator over exactly those devices (backtracking until every
request and constraint is served).

A device that any other allocated ResourceClaim names (of `resources.claims`: ours and
those kube-scheduler allocated for other pods) is never a candidate; only the pod's own
claims do not count against it. An allocation with adminAccess does not take its device,
as in the structured allocator.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from engine import Decision, PodRequest, RequestError
from engine.node.dra import AllocationError, AllocationInput, CelPrograms, NodeView, allocate
from engine.node.dra.cel_programs import SelectorError, device_activation, evaluate, shown
from engine.node.dra.wire import engine_claim, engine_classes, engine_device, engine_slices
from schemas.dra import (
    AttributeValue,
    ClaimAllocation,
    ClaimRequest,
    DeviceKey,
    DeviceResult,
    DraDevice,
    PodClaim,
    device_text,
)
from schemas.events import AllocatedClaimEvent, DeviceAssignment, ResourceSliceEvent
from schemas.vendors import NVIDIA

GPU = NVIDIA.whole
USE_UUID = "nvidia.com/use-gpuuuid"
# Device classes the placer decides, and the driver whose devices they select (its class
# also asks for whole GPUs: `type == "gpu"` where the driver says the type).
GPU_CLASSES: dict[str, str] = {"gpu.nvidia.com": "gpu.nvidia.com"}
TYPE_ATTRIBUTE = "gpu.nvidia.com/type"


class SliceDevice(msgspec.Struct, frozen=True, kw_only=True):
    """A device of a slice with where it comes from."""

    node: str
    driver: str
    pool: str
    device: DraDevice

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device.name)


class AllocatedClaims:
    """Every allocated ResourceClaim of the cluster, and which of them name each device (mutable)."""

    def __init__(self) -> None:
        self._claims: dict[str, AllocatedClaimEvent] = {}  # by claim uid
        self._by_device: dict[DeviceKey, dict[str, AllocatedClaimEvent]] = {}

    def __len__(self) -> int:
        return len(self._claims)

    def apply(self, event: AllocatedClaimEvent) -> bool:
        """The claim's latest allocation (deleted: none); True when a device became free."""
        before = self._drop(event.uid)
        if event.deleted:
            return bool(before)
        self._claims[event.uid] = event
        after = _taken_keys(event)
        for key in after:
            self._by_device.setdefault(key, {})[event.uid] = event
        return bool(before - after)

    def events(self) -> tuple[AllocatedClaimEvent, ...]:
        """Every allocated claim, by uid."""
        return tuple(self._claims[uid] for uid in sorted(self._claims))

    def remove(self, uid: str) -> bool:
        """The claim's tombstone; True when a device became free."""
        return bool(self._drop(uid))

    def holders(self, key: DeviceKey, *, besides: frozenset[str] = frozenset()) -> list[AllocatedClaimEvent]:
        """The claims whose allocation takes the device, but those of `besides` (claim uids)."""
        return [c for uid, c in sorted(self._by_device.get(key, {}).items()) if uid not in besides]

    def _drop(self, uid: str) -> set[DeviceKey]:
        before = self._claims.pop(uid, None)
        keys = _taken_keys(before) if before is not None else set()
        for key in keys:
            named = self._by_device.get(key)
            if named is not None:
                named.pop(uid, None)
                if not named:
                    del self._by_device[key]
        return keys


def _taken_keys(claim: AllocatedClaimEvent) -> set[DeviceKey]:
    return {d.key for d in claim.devices if not d.admin_access}


class _Request(msgspec.Struct, frozen=True, kw_only=True):
    claim: PodClaim
    request: ClaimRequest
    driver: str
    field: str  # claims[c].requests[r], for a reason


class Selection:
    """The CEL selectors of one decision: compiled in the caller's table, devices read once (mutable)."""

    def __init__(self, programs: CelPrograms | None = None) -> None:
        self.programs = programs if programs is not None else CelPrograms()
        self._activations: dict[DeviceKey, dict[str, object]] = {}

    def selects(self, request: _Request, candidate: SliceDevice) -> bool:
        for selector in request.request.selectors:
            activation = self._activations.get(candidate.key)
            try:
                if activation is None:
                    activation = device_activation(candidate.driver, engine_device(candidate.device))
                    self._activations[candidate.key] = activation
                if not evaluate(self.programs.get(selector.cel), activation):
                    return False
            except SelectorError as exc:
                on = f"on device {device_text(candidate.key)}"
                raise RequestError(
                    f"{request.field}.selectors", f"selector {shown(selector.cel)} {on}: {exc}"
                ) from None
        return True


def _requests(claims: tuple[PodClaim, ...], selection: Selection) -> list[_Request]:
    out = []
    for c, claim in enumerate(claims):
        for r, request in enumerate(claim.requests):
            field = f"claims[{c}].requests[{r}]"
            driver = GPU_CLASSES.get(request.device_class)
            if driver is None:
                known = ", ".join(sorted(GPU_CLASSES))
                raise RequestError(
                    f"{field}.deviceClassName", f"device class {request.device_class!r} is not placed here ({known})"
                )
            if request.allocation_mode != "ExactCount":
                raise RequestError(f"{field}.allocationMode", f"{request.allocation_mode!r}: only ExactCount")
            if request.count < 1:
                raise RequestError(f"{field}.count", f"must be at least 1, got {request.count}")
            for selector in request.selectors:
                compiled = selection.programs.get(selector.cel)
                if compiled.error:
                    raise RequestError(f"{field}.selectors", f"selector {shown(selector.cel)}: {compiled.error}")
            out.append(_Request(claim=claim, request=request, driver=driver, field=field))
    return out


def _fits(request: _Request, candidate: SliceDevice, selection: Selection) -> bool:
    if candidate.driver != request.driver or not candidate.device.uuid:
        return False
    kind = candidate.device.attributes.get(TYPE_ATTRIBUTE)
    if kind is not None and kind != "gpu":
        return False  # a MIG slice or another kind of device: the GPU class asks for whole GPUs
    return selection.selects(request, candidate)


def slice_devices(slices: tuple[ResourceSliceEvent, ...]) -> list[SliceDevice]:
    return [
        SliceDevice(node=s.node, driver=s.driver, pool=s.pool, device=d)
        for s in slices
        if not s.deleted
        for d in s.devices
    ]


def candidate_groups(
    claims: tuple[PodClaim, ...], devices: list[SliceDevice], selection: Selection | None = None
) -> list[list[SliceDevice]]:
    """The devices the pod may get, one group per combination of its matchAttribute values.

    Raises RequestError when a claim cannot be read, and when no device matches at all.
    """
    selection = selection if selection is not None else Selection()
    requests = _requests(claims, selection)
    fitting = [d for d in devices if any(_fits(r, d, selection) for r in requests)]
    if not fitting:
        drivers = sorted({r.driver for r in requests})
        raise RequestError("claims", f"no ResourceSlice of {', '.join(drivers)} has a device the claims select")
    attributes = sorted({c.match_attribute for claim in claims for c in claim.constraints})
    if not attributes:
        return [fitting]
    groups: dict[tuple[str, ...], list[SliceDevice]] = {}
    for d in fitting:
        values: list[AttributeValue | None] = [d.device.attributes.get(a) for a in attributes]
        if any(v is None for v in values):
            continue  # a device without the attribute never satisfies the constraint
        # the node is part of the key: a value shared by two nodes is still two groups
        groups.setdefault((d.node, *(f"{type(v).__name__}:{v}" for v in values)), []).append(d)
    if not groups:
        raise RequestError("claims", f"no selected device has the attributes {', '.join(attributes)}")
    return [groups[key] for key in sorted(groups)]


def engine_request(base: PodRequest, claims: tuple[PodClaim, ...], group: list[SliceDevice]) -> PodRequest:
    """The pod's request with the claims' GPUs as a count, restricted to the group's devices."""
    count = sum(r.count for claim in claims for r in claim.requests)
    annotations = dict(base.annotations)
    annotations[USE_UUID] = ",".join(sorted(d.device.uuid for d in group))
    return msgspec.structs.replace(
        base,
        requests={**base.requests, GPU: str(count)},
        annotations=annotations,
        dra_resources=(*base.dra_resources, GPU),
    )


MAX_NAMED_TAKEN = 3  # devices a reason names, with the claims holding them


def taken_by_others(
    claims: tuple[PodClaim, ...], devices: list[SliceDevice], allocated: AllocatedClaims
) -> dict[DeviceKey, list[AllocatedClaimEvent]]:
    """The devices that other claims' allocations take (the pod's own claims do not count)."""
    own = frozenset(c.claim_uid for c in claims if c.claim_uid)
    taken = {}
    for d in devices:
        holders = allocated.holders(d.key, besides=own)
        if holders:
            taken[d.key] = holders
    return taken


def taken_text(taken: dict[DeviceKey, list[AllocatedClaimEvent]]) -> str:
    """`<driver>/<pool>/<device> (ResourceClaim <ns>/<name>)`, for the first few devices."""
    named = [
        f"{device_text(key)} (ResourceClaim {holders[0].namespace}/{holders[0].name})"
        for key, holders in sorted(taken.items())[:MAX_NAMED_TAKEN]
    ]
    more = len(taken) - len(named)
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def place_claims(
    base: PodRequest,
    claims: tuple[PodClaim, ...],
    slices: tuple[ResourceSliceEvent, ...],
    place: Callable[[PodRequest], Decision],
    allocated: AllocatedClaims | None = None,
    programs: CelPrograms | None = None,
) -> tuple[Decision, tuple[ClaimAllocation, ...]]:
    """The engine's best decision for the pod's claims, and each claim's devices (none when unplaced).

    `allocated`: every allocated claim of the cluster; the devices they take are not offered.
    `programs`: the compiled selectors the caller keeps (none: compiled for this call).
    """
    selection = Selection(programs)
    every = slice_devices(slices)
    requests = _requests(claims, selection)
    fitting = [d for d in every if any(_fits(r, d, selection) for r in requests)]
    taken = taken_by_others(claims, fitting, allocated) if allocated is not None else {}
    devices = [d for d in every if d.key not in taken]
    if fitting and all(d.key in taken for d in fitting):
        reason = "cannot allocate all claims: every device the claims select is allocated to another claim: "
        reason += taken_text(taken)
        return Decision(node=None, reason=reason), ()
    best: Decision | None = None
    for group in candidate_groups(claims, devices, selection):
        decision = place(engine_request(base, claims, group))
        # the first decision stands until a placed one beats it (ties: the first group)
        placed_better = decision.node is not None and (best is None or best.node is None or decision.score > best.score)
        if best is None or placed_better:
            best = decision
    assert best is not None  # candidate_groups never returns no group
    if best.node is None:
        if taken:
            note = f"; {len(taken)} selected device(s) allocated to other claims: {taken_text(taken)}"
            best = msgspec.structs.replace(best, reason=(best.reason or "no node can host the pod") + note)
        return best, ()
    try:
        return best, allocations(base.namespace, claims, best.node, best.devices, devices, selection.programs)
    except ValueError as exc:
        return Decision(node=None, reason=str(exc), candidates_considered=best.candidates_considered), ()


def allocations(
    namespace: str,
    claims: tuple[PodClaim, ...],
    node: str,
    chosen: tuple[DeviceAssignment, ...],
    devices: list[SliceDevice],
    programs: CelPrograms | None = None,
) -> tuple[ClaimAllocation, ...]:
    """The chosen devices dealt to the claims' requests by the engine's structured allocator.

    Raises ValueError when a chosen device has no slice device or the devices cannot serve every request.
    """
    by_uuid = {d.device.uuid: d for d in devices if d.node == node and d.device.uuid}
    free: list[SliceDevice] = []
    for assignment in chosen:
        found = by_uuid.get(assignment.uuid)
        if found is None:
            what = f"device {assignment.index} ({assignment.uuid or 'no uuid'}) of {node}"
            raise ValueError(f"{what} is in no ResourceSlice")
        free.append(found)
    slices = engine_slices(node, [(d.driver, d.pool, d.device) for d in free])
    given = AllocationInput(slices=slices, classes=engine_classes(claims, GPU_CLASSES))
    engine_claims = [engine_claim(namespace, claim) for claim in claims]
    try:
        found_results = allocate(NodeView(name=node), engine_claims, given, programs or CelPrograms())
    except AllocationError as exc:
        raise ValueError(str(exc)) from None
    if found_results is None:
        raise ValueError(f"the devices chosen on {node} cannot serve every request of the claims")
    return tuple(
        ClaimAllocation(
            namespace=namespace,
            name=claim.claim_name,
            uid=claim.claim_uid,
            results=tuple(
                DeviceResult(request=r.request, driver=r.driver, pool=r.pool, device=r.device)
                for r in result.devices.results
            ),
        )
        for claim, result in zip(claims, found_results, strict=True)
    )
