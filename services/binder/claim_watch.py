"""The devices every ResourceClaim's allocation takes, from the binder's own list+watch of ResourceClaims.

The API server is the truth, not a topic: before the binder writes a claim's
`status.allocation`, it asks this view whether any device of the new allocation is
named by another claim's allocation, of any scheduler (kube-scheduler allocates the
claims of every pod that is not ours), or by an allocation of ours in flight (a claim
being written right now, or written and not yet seen by the watch). The check and the
hold happen together, in one step of the event loop, so two placements of ours that
name one device cannot both pass.

A result with adminAccess does not take its device (the structured allocator does not
count it as allocated either). Our own writes are held until the watch shows the claim
allocated or deleted; a write the watch never confirms (missed across a relist) is let
go after `confirm_seconds`, so that a lost event cannot keep a device from every claim.

What this cannot see: a claim another scheduler allocates in the moment before our write
that the watch has not delivered yet. Nothing in the API orders two schedulers' writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import msgspec
from kubernetes_asyncio import client

from schemas.dra import DeviceKey, device_text
from services.binder.kube_objects import ObjectMeta
from services.binder.metrics import INFORMER_METRICS
from topoplace.informer import Informer

DEFAULT_CONFIRM_SECONDS = 120.0


class AllocationResult(msgspec.Struct, kw_only=True, rename="camel"):
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None


class AllocationDevices(msgspec.Struct, kw_only=True):
    results: list[AllocationResult] = []


class ClaimAllocationStatus(msgspec.Struct, kw_only=True):
    devices: AllocationDevices = msgspec.field(default_factory=AllocationDevices)


class ClaimStatus(msgspec.Struct, kw_only=True):
    allocation: ClaimAllocationStatus | None = None


class ClaimObject(msgspec.Struct, kw_only=True):
    """A ResourceClaim as the binder's watch reads it: who it is and the devices its allocation names."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: ClaimStatus = msgspec.field(default_factory=ClaimStatus)

    def taken(self) -> frozenset[DeviceKey]:
        """The devices the allocation makes unavailable to other claims (none while unallocated)."""
        allocation = self.status.allocation
        if allocation is None:
            return frozenset()
        return frozenset(
            (r.driver, r.pool, r.device) for r in allocation.devices.results if r.device and not r.admin_access
        )


class Collision(msgspec.Struct, frozen=True, kw_only=True):
    """A device of a new allocation that another claim's allocation already names."""

    device: DeviceKey
    claim: str  # "<namespace>/<name>" of the other claim
    in_flight: bool  # an allocation of ours being written (or not yet seen by the watch)

    def reason(self) -> str:
        how = "is being allocated to" if self.in_flight else "is already allocated to"
        return f"device {device_text(self.device)} {how} ResourceClaim {self.claim}"


class _Observed(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # "<namespace>/<name>"
    devices: frozenset[DeviceKey]


class _Ours(msgspec.Struct, kw_only=True):
    name: str
    devices: frozenset[DeviceKey]
    written_at: float | None = None  # None while the write is in flight


class AllocatedDevices:
    """Which claim's allocation takes each device: the watch's claims and ours in flight (mutable)."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, confirm_seconds: float = DEFAULT_CONFIRM_SECONDS
    ) -> None:
        self._clock = clock
        self._confirm_seconds = confirm_seconds
        self._observed: dict[str, _Observed] = {}  # claim uid -> what the watch last saw allocated
        self._by_device: dict[DeviceKey, set[str]] = {}  # device -> uids of observed claims taking it
        self._ours: dict[str, _Ours] = {}  # claim uid -> an allocation of ours not yet seen by the watch

    # --- the watch's side -----------------------------------------------------------------------

    def replace(self, claims: list[ClaimObject]) -> None:
        """A full list: the claims it has are the cluster's claims."""
        listed = {c.metadata.uid for c in claims}
        for uid in [u for u in self._observed if u not in listed]:
            self._forget(uid)
        for claim in claims:
            self.apply("MODIFIED", claim)

    def apply(self, event_type: str, claim: ClaimObject) -> None:
        uid = claim.metadata.uid
        self._forget(uid)
        if event_type == "DELETED":
            self._ours.pop(uid, None)
            return
        if claim.status.allocation is not None:
            self._ours.pop(uid, None)  # the watch has it now (or what replaced it)
            devices = claim.taken()
            self._observed[uid] = _Observed(name=f"{claim.metadata.namespace}/{claim.metadata.name}", devices=devices)
            for key in devices:
                self._by_device.setdefault(key, set()).add(uid)

    def _forget(self, uid: str) -> None:
        before = self._observed.pop(uid, None)
        for key in before.devices if before is not None else ():
            holders = self._by_device.get(key)
            if holders is not None:
                holders.discard(uid)
                if not holders:
                    del self._by_device[key]

    # --- the writer's side ----------------------------------------------------------------------

    def reserve(self, uid: str, name: str, devices: Iterable[DeviceKey]) -> Collision | None:
        """Hold the devices for claim `uid` ("<namespace>/<name>"), or the first collision (nothing held)."""
        wanted = frozenset(devices)
        self._expire()
        for key in sorted(wanted):
            for other in sorted(self._by_device.get(key, ())):
                if other != uid:
                    return Collision(device=key, claim=self._observed[other].name, in_flight=False)
            for other, ours in sorted(self._ours.items()):
                if other != uid and key in ours.devices:
                    return Collision(device=key, claim=ours.name, in_flight=True)
        self._ours[uid] = _Ours(name=name, devices=wanted)
        return None

    def written(self, uid: str) -> None:
        """The allocation was written: held until the watch shows it (or `confirm_seconds` pass)."""
        ours = self._ours.get(uid)
        if ours is not None:
            ours.written_at = self._clock()

    def release(self, uid: str) -> None:
        """The write failed, or we took our allocation back: nothing of ours is held for the claim."""
        self._ours.pop(uid, None)

    def _expire(self) -> None:
        deadline = self._clock() - self._confirm_seconds
        for uid in [u for u, o in self._ours.items() if o.written_at is not None and o.written_at < deadline]:
            del self._ours[uid]

    def __len__(self) -> int:
        return len(self._observed)


NOT_SERVED_RETRY_SECONDS = 60.0  # a cluster without resource.k8s.io/v1 is asked again this often


def watch_claims(
    api: client.ResourceV1Api,
    allocated: AllocatedDevices,
    *,
    applied: Callable[[], None] = lambda: None,
    resync_seconds: float = 300.0,
) -> Informer[ClaimObject]:
    """Every ResourceClaim of the cluster into `allocated`; `applied()` after each list or change (tests wait on it)."""

    async def listed(claims: list[ClaimObject], resync: bool) -> None:
        allocated.replace(claims)
        applied()

    async def changed(event_type: str, claim: ClaimObject) -> None:
        allocated.apply(event_type, claim)
        applied()

    return Informer(
        "resourceclaims",
        api.list_resource_claim_for_all_namespaces,
        ClaimObject,
        on_list=listed,
        on_change=changed,
        metrics=INFORMER_METRICS,
        resync_seconds=resync_seconds,
        not_served_retry_seconds=NOT_SERVED_RETRY_SECONDS,
    )
