"""DRA claims in the placer: selectors, matchAttribute groups, and the devices dealt back to the claims."""

from __future__ import annotations

import msgspec
import pytest
from placer_builders import pending, status, topology

from engine import Decision, Engine, PodRequest, RequestError
from schemas.dra import ClaimConstraint, ClaimRequest, ClaimSelector, DeviceResult, DraDevice, PodClaim
from schemas.events import DeviceAssignment, PendingGangEvent, PendingPodEvent, PlacementOutcome, ResourceSliceEvent
from services.placer.claims import (
    USE_UUID,
    SliceDevice,
    allocations,
    candidate_groups,
    engine_request,
    place_claims,
    slice_devices,
)
from services.placer.decide import decide
from services.placer.decide_gang import decide_gang
from services.placer.view import ClusterView

DRIVER = "gpu.nvidia.com"
PCIE = "resource.kubernetes.io/pcieRoot"


def gpu(i: int, *, root: str, product: str = "H100", kind: str = "gpu") -> DraDevice:
    return DraDevice(
        name=f"gpu-{i}",
        uuid=f"GPU-{i}",
        attributes={f"{DRIVER}/uuid": f"GPU-{i}", f"{DRIVER}/productName": product, f"{DRIVER}/type": kind,
                    f"{DRIVER}/index": i, PCIE: root},
    )  # fmt: skip


SLICES = (
    ResourceSliceEvent(
        name="n1-gpus",
        node="n1",
        driver=DRIVER,
        pool="n1",
        devices=(
            gpu(0, root="pci0"),
            gpu(1, root="pci0"),
            gpu(2, root="pci1", product="A100"),
            gpu(3, root="pci1"),
            gpu(4, root="pci1", kind="mig"),
        ),
    ),
)


def claim(count: int = 1, *selectors: str, constraints: tuple[str, ...] = (), device_class: str = DRIVER) -> PodClaim:
    request = ClaimRequest(
        name="gpus",
        device_class=device_class,
        count=count,
        selectors=tuple(ClaimSelector(cel=s) for s in selectors),
    )
    return PodClaim(
        pod_claim_name="gpu",
        claim_name="pod-gpu-abcde",
        claim_uid="claim-uid",
        requests=(request,),
        constraints=tuple(ClaimConstraint(match_attribute=a) for a in constraints),
    )


def names(group: list[SliceDevice]) -> list[str]:
    return [d.device.name for d in group]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.nvidia.com"', ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]),
        ('device.attributes["gpu.nvidia.com"].productName == "A100"', ["gpu-2"]),
        ('device.attributes["gpu.nvidia.com"]["productName"] != "A100"', ["gpu-0", "gpu-1", "gpu-3"]),
        (
            'device.attributes["resource.kubernetes.io"].pcieRoot == "pci1" && '
            'device.attributes["gpu.nvidia.com"].index == 3',
            ["gpu-3"],
        ),  # fmt: skip
        # CEL beyond equalities, as Kubernetes evaluates it
        ('device.attributes["gpu.nvidia.com"].index > 2', ["gpu-3"]),
        ('device.attributes["gpu.nvidia.com"].productName in ["A100", "B200"]', ["gpu-2"]),
        ('device.attributes["gpu.nvidia.com"].productName.startsWith("H") || false', ["gpu-0", "gpu-1", "gpu-3"]),
        ('!has(device.attributes["gpu.nvidia.com"].missing)', ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]),
    ],
)
def test_selectors_pick_the_devices_their_expressions_describe(expression: str, expected: list[str]) -> None:
    groups = candidate_groups((claim(1, expression),), slice_devices(SLICES))
    assert [names(g) for g in groups] == [expected]


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("device.driver == 'other.example.com'", "no ResourceSlice of gpu.nvidia.com has a device the claims select"),
        ('device.attributes["gpu.nvidia.com"].index == true', "no ResourceSlice"),  # a bool never equals an int
        ("device.driver ==", "claims[0].requests[0].selectors: selector 'device.driver ==': compilation failed"),
        ('device.attributes["gpu.nvidia.com"].missing != "x"', "on device gpu.nvidia.com/n1/gpu-0: CEL runtime error"),
        ("device.driver", "claims[0].requests[0].selectors: selector 'device.driver' on device"),
    ],
)
def test_a_selector_that_selects_nothing_or_errs_is_a_request_error(expression: str, error: str) -> None:
    with pytest.raises(RequestError) as raised:
        candidate_groups((claim(1, expression),), slice_devices(SLICES))
    assert error in str(raised.value)


def test_candidates_are_whole_gpus_matching_the_selectors() -> None:
    groups = candidate_groups((claim(1, 'device.attributes["gpu.nvidia.com"].productName == "H100"'),),
                              slice_devices(SLICES))  # fmt: skip
    assert [names(g) for g in groups] == [["gpu-0", "gpu-1", "gpu-3"]]  # gpu-4 is a MIG device


def test_match_attribute_splits_the_candidates_by_the_shared_value() -> None:
    groups = candidate_groups((claim(2, constraints=(PCIE,)),), slice_devices(SLICES))
    assert [names(g) for g in groups] == [["gpu-0", "gpu-1"], ["gpu-2", "gpu-3"]]


def test_an_unknown_device_class_and_no_matching_slice_are_request_errors() -> None:
    with pytest.raises(RequestError, match="deviceClassName"):
        candidate_groups((claim(device_class="fpga.example.com"),), slice_devices(SLICES))
    with pytest.raises(RequestError, match="no ResourceSlice of gpu.nvidia.com"):
        candidate_groups((claim(),), slice_devices(()))


def test_the_engine_request_counts_the_claims_and_lists_the_group_uuids() -> None:
    base = PodRequest(uid="u", requests={"cpu": "1"})
    group = candidate_groups((claim(2, constraints=(PCIE,)),), slice_devices(SLICES))[1]
    request = engine_request(base, (claim(2),), group)
    assert request.requests == {"cpu": "1", "nvidia.com/gpu": "2"}
    assert request.annotations[USE_UUID] == "GPU-2,GPU-3"
    assert "nvidia.com/gpu" in request.dra_resources


def test_the_best_scored_group_wins_and_its_devices_go_to_the_claim() -> None:
    seen: list[str] = []

    def place(request: PodRequest) -> Decision:
        uuids = request.annotations[USE_UUID].split(",")
        seen.append(request.annotations[USE_UUID])
        devices = tuple(DeviceAssignment(index=int(u.split("-")[1]), uuid=u) for u in uuids[:2])
        return Decision(node="n1", devices=devices, score=10.0 if "GPU-2" in uuids else 1.0)

    decision, claims = place_claims(
        PodRequest(uid="u", namespace="ns"), (claim(2, constraints=(PCIE,)),), SLICES, place
    )
    assert seen == ["GPU-0,GPU-1", "GPU-2,GPU-3"]
    assert decision.node == "n1"
    assert claims[0].namespace == "ns" and claims[0].name == "pod-gpu-abcde" and claims[0].uid == "claim-uid"
    assert claims[0].results == (
        DeviceResult(request="gpus", driver=DRIVER, pool="n1", device="gpu-2"),
        DeviceResult(request="gpus", driver=DRIVER, pool="n1", device="gpu-3"),
    )


def test_a_chosen_device_without_a_slice_device_is_refused() -> None:
    chosen = (DeviceAssignment(index=7, uuid="GPU-7"),)
    with pytest.raises(ValueError, match="in no ResourceSlice"):
        allocations("ns", (claim(),), "n1", chosen, slice_devices(SLICES))


def test_two_requests_each_get_the_devices_their_selectors_allow() -> None:
    a100 = ClaimSelector(cel='device.attributes["gpu.nvidia.com"].productName == "A100"')
    narrow = ClaimRequest(name="a100", device_class=DRIVER, count=1, selectors=(a100,))
    wide = ClaimRequest(name="any", device_class=DRIVER, count=1)
    both = PodClaim(pod_claim_name="g", claim_name="c", claim_uid="u", requests=(wide, narrow))
    chosen = (DeviceAssignment(index=2, uuid="GPU-2"), DeviceAssignment(index=3, uuid="GPU-3"))
    (allocation,) = allocations("ns", (both,), "n1", chosen, slice_devices(SLICES))
    assert {(r.request, r.device) for r in allocation.results} == {("any", "gpu-3"), ("a100", "gpu-2")}


# --- decide(): the real engine over a view with slices ---------------------------------------


def _view_with_slices(*nodes: str, numa_split: int = 2) -> ClusterView:
    view = ClusterView()
    for node in nodes:
        view.apply(topology(node, 4))
        view.apply(status(node, allocatable={"cpu": "8", "memory": "64Gi", "pods": "110"}))  # no nvidia.com/gpu
        devices = tuple(
            DraDevice(name=f"gpu-{i}", uuid=f"GPU-{node}-{i}",
                      attributes={f"{DRIVER}/type": "gpu", PCIE: f"{node}-root{i // numa_split}"})
            for i in range(4)
        )  # fmt: skip
        view.apply(ResourceSliceEvent(name=f"{node}-slice", node=node, driver=DRIVER, pool=node, devices=devices))
    return view


def _claimed(uid: str, *claims: PodClaim) -> PendingPodEvent:
    return msgspec.structs.replace(pending(uid, 0), requests={"cpu": "1"}, claims=claims)


def test_a_claimed_pod_is_placed_on_devices_sharing_the_attribute_with_the_claim_filled_in() -> None:
    view = _view_with_slices("n1")
    result = decide(view, _claimed("p1", claim(2, constraints=(PCIE,))), engine=Engine())
    placement = result.placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    assert placement.node == "n1"
    (allocation,) = placement.claims
    devices = sorted(r.device for r in allocation.results)
    assert devices == sorted(f"gpu-{d.index}" for d in placement.devices)
    assert devices in (["gpu-0", "gpu-1"], ["gpu-2", "gpu-3"])  # one PCIe root
    assert placement.requests == {"cpu": "1"}  # the claims' GPUs are not node resources
    # the view holds them: a second claimed pod gets the other root's pair
    second = decide(view, _claimed("p2", claim(2, constraints=(PCIE,))), engine=Engine()).placement
    assert second is not None and second.outcome is PlacementOutcome.PLACED
    other = sorted(r.device for r in second.claims[0].results)
    assert set(other).isdisjoint(devices) and len(other) == 2


def test_a_claim_that_no_pcie_root_can_serve_is_unschedulable() -> None:
    view = _view_with_slices("n1")
    placement = decide(view, _claimed("p1", claim(3, constraints=(PCIE,))), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert not placement.claims


def test_a_node_without_slices_gets_no_claimed_pod() -> None:
    view = _view_with_slices("n1")
    view.apply(topology("bare", 8))
    view.apply(status("bare"))
    placement = decide(view, _claimed("p1", claim(4)), engine=Engine()).placement
    assert placement is not None and placement.node == "n1"
    nothing = decide(view, _claimed("p2", claim(1)), engine=Engine()).placement  # n1 is full, "bare" has no slice
    assert nothing is not None and nothing.outcome is PlacementOutcome.UNSCHEDULABLE


def test_without_any_slice_the_reason_says_so() -> None:
    view = ClusterView()
    view.apply(topology("bare", 8))
    view.apply(status("bare"))
    placement = decide(view, _claimed("p1", claim(1)), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "no ResourceSlice of gpu.nvidia.com" in placement.reason


def test_a_gang_member_with_claims_is_refused_rather_than_bound_without_its_devices() -> None:
    view = _view_with_slices("n1", "n2")
    members = (_claimed("p1", claim(1)), _claimed("p2", claim(1)))
    gang = PendingGangEvent(name="default/job", namespace="default", min_member=2, members=members)
    placement = decide_gang(view, gang, engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "ResourceClaims of gang members read without their spec" in placement.reason
