"""A pod asking `nvidia.com/gpu` the old way, served by DRA on a node that publishes its GPUs only as
ResourceSlices (KEP-5004): the placement carries the claim the binder creates."""

from __future__ import annotations

from typing import Any

import msgspec
from placer_builders import pending, status, topology
from test_placer_dra_allocator import GPU_DRIVER, device, placed, slice_event

from schemas.dra import ContainerRequests
from schemas.dra_objects import AllocationResult, DeviceClassSpec
from schemas.events import AllocatedClaimEvent, DeviceClassEvent, PendingPodEvent, PlacementOutcome
from services.placer.view import ClusterView

GPU = "nvidia.com/gpu"
ALLOCATABLE = {"cpu": "8", "memory": "32Gi", "pods": "110"}


def gpu_class(extended: str | None = GPU) -> DeviceClassEvent:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}]}
    if extended is not None:
        spec["extendedResourceName"] = extended
    return DeviceClassEvent(name="gpus", spec=msgspec.convert(spec, DeviceClassSpec))


def dra_view(*events: Any, plugin_gpus: int = 0) -> ClusterView:
    """n1: four GPUs published only as a ResourceSlice; n2 (with plugin_gpus): a device plugin's."""
    view = ClusterView()
    view.apply(topology("n1", 0))
    view.apply(status("n1", allocatable=ALLOCATABLE))
    if plugin_gpus:
        view.apply(topology("n2", plugin_gpus))
        view.apply(status("n2", allocatable={**ALLOCATABLE, GPU: str(plugin_gpus)}))
    view.apply(slice_event("n1", GPU_DRIVER, [device(i, "n1") for i in range(4)]))
    for event in events:
        view.apply(event)
    return view


def asking(uid: str, gpus: int) -> PendingPodEvent:
    containers = (ContainerRequests(name="main", requests={"cpu": "1", GPU: str(gpus)}),)
    return msgspec.structs.replace(pending(uid, gpus), requests={"cpu": "1", GPU: str(gpus)}, containers=containers)


def test_the_placement_carries_the_claim_to_create_with_its_allocation_and_mappings() -> None:
    placement = placed(dra_view(gpu_class()), asking("p1", 2))
    assert placement.outcome is PlacementOutcome.PLACED, placement.reason
    assert placement.node == "n1"
    (claim,) = placement.claims
    assert claim.name == "" and claim.extended is not None
    assert claim.extended.generate_name == "pod-p1-extended-resources-"
    assert claim.extended.annotations == {"resource.kubernetes.io/extended-resource-claim": "true"}
    (request,) = claim.extended.spec.devices.requests
    assert request.name == "container-0-request-1" and request.exactly is not None
    assert (request.exactly.device_class_name, request.exactly.count) == ("gpus", 2)
    assert [(m.container_name, m.resource_name, m.request_name) for m in claim.extended.request_mappings] == [
        ("main", GPU, "container-0-request-1")
    ]
    assert [r.device for r in claim.results] == ["gpu-0", "gpu-1"]
    assert (
        claim.allocation is not None
        and [r.request for r in claim.allocation.devices.results] == ["container-0-request-1"] * 2
    )


def test_devices_held_by_claims_and_by_decisions_in_flight_are_not_given_again() -> None:
    theirs = msgspec.convert(
        {"devices": {"results": [{"request": "r", "driver": GPU_DRIVER, "pool": "n1", "device": "gpu-0"}]}},
        AllocationResult,
    )
    held = AllocatedClaimEvent(namespace="other", name="theirs", uid="u-theirs", node="n1", allocation=theirs)
    view = dra_view(gpu_class(), held)
    first = placed(view, asking("p1", 2))
    assert [r.device for r in first.claims[0].results] == ["gpu-1", "gpu-2"]
    second = placed(view, asking("p2", 2))  # p1's claim is not written yet: its devices are still taken
    assert second.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "through DRA on 1 node(s) publishing no nvidia.com/gpu: cannot allocate all claims" in second.reason


def test_a_node_whose_device_plugin_publishes_the_resource_comes_first() -> None:
    placement = placed(dra_view(gpu_class(), plugin_gpus=4), asking("p1", 2))
    assert placement.node == "n2" and placement.claims == ()
    assert len(placement.devices) == 2


def test_without_a_class_serving_the_resource_the_pod_stays_unschedulable() -> None:
    placement = placed(dra_view(gpu_class(extended=None)), asking("p1", 2))
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "through DRA" not in placement.reason
