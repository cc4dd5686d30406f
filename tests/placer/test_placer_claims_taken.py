"""DRA in the placer: a device that any other allocated ResourceClaim names (ours, or kube-scheduler's
for another pod) is never offered; the pod's own claim and adminAccess allocations do not count."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from placer_builders import pending, status, topology

from engine import Engine
from schemas import topics
from schemas.dra import AllocatedDevice, ClaimRequest, DraDevice, PodClaim
from schemas.events import AllocatedClaimEvent, PendingPodEvent, PlacementOutcome, ResourceSliceEvent
from services.placer.claims import AllocatedClaims
from services.placer.decide import decide
from services.placer.view import ClusterView

DRIVER = "gpu.nvidia.com"
NODE = "n1"
GPUS = 4


def view_with_slice(node: str = NODE) -> ClusterView:
    view = ClusterView()
    view.apply(topology(node, GPUS))
    view.apply(status(node, allocatable={"cpu": "8", "memory": "64Gi", "pods": "110"}))
    devices = tuple(
        DraDevice(name=f"gpu-{i}", uuid=f"GPU-{node}-{i}", attributes={f"{DRIVER}/type": "gpu"}) for i in range(GPUS)
    )
    view.apply(ResourceSliceEvent(name=f"{node}-slice", node=node, driver=DRIVER, pool=node, devices=devices))
    return view


def allocated(uid: str, *devices: int, admin: bool = False, name: str = "") -> AllocatedClaimEvent:
    return AllocatedClaimEvent(
        uid=uid,
        namespace="other-team",
        name=name or f"claim-{uid}",
        node=NODE,
        devices=tuple(
            AllocatedDevice(driver=DRIVER, pool=NODE, device=f"gpu-{i}", admin_access=admin) for i in devices
        ),
    )


def claimed(uid: str, count: int, claim_uid: str | None = None) -> PendingPodEvent:
    claim = PodClaim(
        pod_claim_name="gpu",
        claim_name=f"pod-{uid}-gpu",
        claim_uid=claim_uid or f"claim-of-{uid}",
        requests=(ClaimRequest(name="gpus", device_class=DRIVER, count=count),),
    )
    return msgspec.structs.replace(pending(uid, 0), requests={"cpu": "1"}, claims=(claim,))


def chosen(view: ClusterView, pod: PendingPodEvent) -> list[str]:
    placement = decide(view, pod, engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    return sorted(r.device for c in placement.claims for r in c.results)


def test_devices_allocated_by_another_scheduler_are_never_offered() -> None:
    view = view_with_slice()
    view.apply(allocated("ks-1", 0, 2))  # kube-scheduler's claim for a pod that is not ours

    assert chosen(view, claimed("p1", 2)) == ["gpu-1", "gpu-3"]


def test_when_every_selected_device_is_taken_the_pod_is_unschedulable_naming_device_and_claim() -> None:
    view = view_with_slice()
    view.apply(allocated("ks-1", 0, 1, name="web-gpu"))
    view.apply(allocated("ks-2", 2, 3))

    placement = decide(view, claimed("p1", 1), engine=Engine()).placement

    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert not placement.claims
    assert "allocated to another claim" in placement.reason
    assert "gpu.nvidia.com/n1/gpu-0 (ResourceClaim other-team/web-gpu)" in placement.reason


def test_too_few_free_devices_is_unschedulable_and_the_reason_names_the_taken_ones() -> None:
    view = view_with_slice()
    view.apply(allocated("ks-1", 0, 1, 2))

    placement = decide(view, claimed("p1", 2), engine=Engine()).placement

    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "3 selected device(s) allocated to other claims" in placement.reason


def test_the_pods_own_allocated_claim_does_not_keep_its_devices_from_it() -> None:
    view = view_with_slice()
    view.apply(allocated("mine", 0, 1, 2))  # an earlier decision of ours for this very claim

    assert len(chosen(view, claimed("p1", 4, claim_uid="mine"))) == 4


def test_an_admin_access_allocation_leaves_the_device_available() -> None:
    view = view_with_slice()
    view.apply(allocated("monitor", 0, 1, 2, 3, admin=True))

    assert chosen(view, claimed("p1", 4)) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_a_deallocated_claim_frees_its_devices_and_says_capacity_grew() -> None:
    view = view_with_slice()
    view.apply(allocated("ks-1", 0, 1, 2, 3))

    gone = view.apply(msgspec.structs.replace(allocated("ks-1"), deleted=True))

    assert gone.capacity_grew
    assert len(chosen(view, claimed("p1", 4))) == 4


def test_a_claims_tombstone_frees_its_devices() -> None:
    view = view_with_slice()
    view.apply(allocated("ks-1", 0, 1, 2, 3))

    assert view.apply_tombstone(topics.RESOURCE_CLAIMS.name, "ks-1").capacity_grew
    assert len(chosen(view, claimed("p1", 4))) == 4


def test_a_claim_whose_allocation_moves_frees_only_what_it_left() -> None:
    claims = AllocatedClaims()
    assert not claims.apply(allocated("c", 0, 1))
    assert claims.apply(allocated("c", 1, 2))  # gpu-0 left
    assert not claims.apply(allocated("c", 1, 2, 3))
    assert [c.uid for c in claims.holders((DRIVER, NODE, "gpu-1"))] == ["c"]
    assert claims.holders((DRIVER, NODE, "gpu-0")) == []
    assert claims.holders((DRIVER, NODE, "gpu-1"), besides=frozenset({"c"})) == []


@settings(max_examples=60, deadline=None)
@given(
    taken=st.lists(st.sets(st.integers(0, GPUS - 1), min_size=1), max_size=3),
    admin=st.sets(st.integers(0, GPUS - 1)),
    count=st.integers(1, GPUS),
)
def test_no_decision_ever_names_a_device_another_claim_holds(
    taken: list[set[int]], admin: set[int], count: int
) -> None:
    view = view_with_slice()
    for i, devices in enumerate(taken):
        view.apply(allocated(f"ks-{i}", *sorted(devices)))
    view.apply(allocated("admin", *sorted(admin), admin=True))
    held = {f"gpu-{d}" for devices in taken for d in devices}

    placement = decide(view, claimed("p1", count), engine=Engine()).placement

    assert placement is not None
    if GPUS - len(held) >= count:
        assert placement.outcome is PlacementOutcome.PLACED, placement.reason
        devices = {r.device for c in placement.claims for r in c.results}
        assert len(devices) == count and not devices & held
    else:
        assert placement.outcome is PlacementOutcome.UNSCHEDULABLE and not placement.claims
