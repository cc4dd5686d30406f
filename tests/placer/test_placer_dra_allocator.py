"""DRA claims read whole, allocated node by node by the engine's structured allocator in the placer:
DeviceClass selectors and config, taints, firstAvailable, others' claims, topology leading."""

from __future__ import annotations

from typing import Any

import msgspec
from placer_builders import pending, status, topology

from engine import Engine
from schemas import topics
from schemas.dra import PodClaim
from schemas.dra_objects import (
    AllocationResult,
    DeviceClassSpec,
    DeviceTaintRuleSpec,
    ResourceClaimSpec,
    ResourceSliceSpec,
)
from schemas.events import (
    AllocatedClaimEvent,
    DeviceClassEvent,
    DeviceTaintRuleEvent,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
    ResourceSliceEvent,
)
from services.placer.decide import decide
from services.placer.view import ClusterView

GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
PCIE = "resource.kubernetes.io/pcieRoot"


def device(i: int, node: str, *, product: str = "H100", root: str = "pci0", taint: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"gpu-{i}",
        "attributes": {
            "uuid": {"string": f"GPU-{node}-{i}"},
            "productName": {"string": product},
            PCIE: {"string": root},
        },
    }
    if taint:
        body["taints"] = [{"key": "example.com/broken", "effect": "NoSchedule"}]
    return body


def slice_event(node: str, driver: str, devices: list[dict[str, Any]], name: str = "") -> ResourceSliceEvent:
    spec = {"driver": driver, "pool": {"name": node, "generation": 1}, "nodeName": node, "devices": devices}
    return ResourceSliceEvent(
        name=name or f"{node}-{driver}",
        node=node,
        driver=driver,
        pool=node,
        spec=msgspec.convert(spec, ResourceSliceSpec),
    )


def device_class(name: str, expression: str, config: dict[str, Any] | None = None) -> DeviceClassEvent:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if config is not None:
        spec["config"] = [{"opaque": {"driver": GPU_DRIVER, "parameters": config}}]
    return DeviceClassEvent(name=name, spec=msgspec.convert(spec, DeviceClassSpec))


def claim(requests: list[dict[str, Any]], uid: str = "claim-1", **devices: Any) -> PodClaim:
    spec = msgspec.convert({"devices": {"requests": requests, **devices}}, ResourceClaimSpec)
    return PodClaim(pod_claim_name="gpu", claim_name=f"c-{uid}", claim_uid=uid, spec=spec)


def exactly(name: str, count: int = 1, device_class_name: str = "gpus", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class_name, "count": count, **fields}}


def claimed(uid: str, *claims: PodClaim) -> PendingPodEvent:
    return msgspec.structs.replace(pending(uid, 0), requests={"cpu": "1"}, claims=claims)


def view_with(*events: Any, nodes: tuple[str, ...] = ("n1",), gpus: int = 4) -> ClusterView:
    view = ClusterView()
    for node in nodes:
        view.apply(topology(node, gpus))
        view.apply(status(node))
    view.apply(device_class("gpus", f'device.driver == "{GPU_DRIVER}"'))
    for event in events:
        view.apply(event)
    return view


def placed(view: ClusterView, pod: PendingPodEvent) -> PlacementEvent:
    placement = decide(view, pod, engine=Engine()).placement
    assert placement is not None
    return placement


def devices_of(placement: PlacementEvent) -> list[str]:
    return sorted(r.device for c in placement.claims for r in c.results)


def test_a_device_class_with_a_cel_selector_gives_its_devices_and_its_config_from_class() -> None:
    h100 = device_class(
        "h100", f'device.attributes["{GPU_DRIVER}"].productName == "H100"', config={"sharing": "exclusive"}
    )
    devices = [device(0, "n1", product="A100"), device(1, "n1"), device(2, "n1", product="A100"), device(3, "n1")]
    view = view_with(slice_event("n1", GPU_DRIVER, devices), h100)
    placement = placed(view, claimed("p1", claim([exactly("gpus", 2, "h100")])))
    assert placement.outcome is PlacementOutcome.PLACED, placement.reason
    assert devices_of(placement) == ["gpu-1", "gpu-3"]
    (allocation,) = placement.claims
    assert allocation.allocation is not None
    (config,) = allocation.allocation.devices.config
    assert config.source == "FromClass" and config.opaque is not None
    assert config.opaque.parameters == {"sharing": "exclusive"}
    # the view holds them: the GPUs the node agent knows are the decision's devices
    assert sorted(d.uuid for d in placement.devices) == ["GPU-n1-1", "GPU-n1-3"]
    again = placed(view, claimed("p2", claim([exactly("gpus", 1, "h100")], uid="claim-2")))
    assert again.outcome is PlacementOutcome.UNSCHEDULABLE
    assert again.reason == "cannot allocate all claims"


def test_the_claims_own_config_is_copied_with_source_from_claim() -> None:
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1")]))
    config = [{"requests": ["gpus"], "opaque": {"driver": GPU_DRIVER, "parameters": {"mps": True}}}]
    placement = placed(view, claimed("p1", claim([exactly("gpus")], config=config)))
    (allocation,) = placement.claims
    assert allocation.allocation is not None
    # a config naming every request names none, as upstream writes it (empty: all)
    assert [(c.source, c.requests) for c in allocation.allocation.devices.config] == [("FromClaim", ())]


def test_a_tainted_device_is_never_given() -> None:
    devices = [device(0, "n1", taint=True), device(1, "n1")]
    view = view_with(slice_event("n1", GPU_DRIVER, devices))
    two = placed(view, claimed("p1", claim([exactly("gpus", 2)])))
    assert two.outcome is PlacementOutcome.UNSCHEDULABLE and two.reason == "cannot allocate all claims"
    one = placed(view, claimed("p2", claim([exactly("gpus")], uid="claim-2")))
    assert devices_of(one) == ["gpu-1"]
    nothing = placed(view, claimed("p3", claim([exactly("gpus")], uid="claim-3")))
    assert nothing.outcome is PlacementOutcome.UNSCHEDULABLE  # gpu-0 stays untouched


def test_a_toleration_lets_the_request_have_the_tainted_device() -> None:
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1", taint=True)]))
    tolerating = exactly("gpus", tolerations=[{"key": "example.com/broken", "operator": "Exists"}])
    assert devices_of(placed(view, claimed("p1", claim([tolerating])))) == ["gpu-0"]


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1"), device(1, "n1")]))
    request = {
        "name": "gpus",
        "firstAvailable": [
            {"name": "four", "deviceClassName": "gpus", "count": 4},
            {"name": "two", "deviceClassName": "gpus", "count": 2},
        ],
    }
    placement = placed(view, claimed("p1", claim([request])))
    assert {r.request for r in placement.claims[0].results} == {"gpus/two"}


def test_devices_another_schedulers_claim_holds_are_never_given() -> None:
    allocation = {"devices": {"results": [{"request": "r", "driver": GPU_DRIVER, "pool": "n1", "device": "gpu-0"}]}}
    theirs = AllocatedClaimEvent(
        uid="theirs",
        namespace="team-b",
        name="web",
        node="n1",
        allocation=msgspec.convert(allocation, AllocationResult),
    )
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1"), device(1, "n1")]), theirs)
    placement = placed(view, claimed("p1", claim([exactly("gpus")])))
    assert devices_of(placement) == ["gpu-1"]


def test_two_pods_decided_in_a_row_never_share_a_device() -> None:
    view = view_with(slice_event("n1", GPU_DRIVER, [device(i, "n1") for i in range(4)]))
    first = placed(view, claimed("p1", claim([exactly("gpus", 2)], uid="a")))
    second = placed(view, claimed("p2", claim([exactly("gpus", 2)], uid="b")))
    assert set(devices_of(first)).isdisjoint(devices_of(second)) and len(devices_of(second)) == 2


def test_a_gpu_and_a_nic_land_on_one_pcie_root_where_the_claim_leaves_the_choice() -> None:
    gpus = [device(0, "n1", root="pci0"), device(1, "n1", root="pci1")]
    nic = {"name": "nic-0", "attributes": {PCIE: {"string": "pci1"}}}
    nics = device_class("nics", f'device.driver == "{NIC_DRIVER}"')
    view = view_with(slice_event("n1", GPU_DRIVER, gpus), slice_event("n1", NIC_DRIVER, [nic]), nics)
    placement = placed(view, claimed("p1", claim([exactly("gpu"), exactly("nic", device_class_name="nics")])))
    assert devices_of(placement) == ["gpu-1", "nic-0"]


def test_a_claim_that_does_not_exist_yet_is_unschedulable_with_kube_schedulers_reason() -> None:
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1")]))
    waiting = PodClaim(
        pod_claim_name="gpu", claim_name="", waiting='pod "default/pod-p1": ResourceClaim not created yet'
    )
    placement = placed(view, claimed("p1", waiting))
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason == 'pod "default/pod-p1": ResourceClaim not created yet'


def test_a_missing_device_class_is_an_invalid_request_naming_it() -> None:
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1")]))
    placement = placed(view, claimed("p1", claim([exactly("gpus", device_class_name="nowhere")])))
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason.startswith("invalid request: claims:") and "nowhere" in placement.reason


def test_a_device_taint_rule_taints_the_device_it_selects_until_it_is_deleted() -> None:
    spec = {
        "deviceSelector": {"driver": GPU_DRIVER, "pool": "n1", "device": "gpu-0"},
        "taint": {"key": "example.com/xid", "effect": "NoSchedule"},
    }
    rule = DeviceTaintRuleEvent(name="xid-79", spec=msgspec.convert(spec, DeviceTaintRuleSpec))
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1"), device(1, "n1")]), rule)
    first = placed(view, claimed("p1", claim([exactly("gpus")], uid="a")))
    assert devices_of(first) == ["gpu-1"]
    assert placed(view, claimed("p2", claim([exactly("gpus")], uid="b"))).outcome is PlacementOutcome.UNSCHEDULABLE
    change = view.apply_tombstone(topics.RESOURCE_TAINT_RULES.name, "xid-79")
    assert change.capacity_grew  # parked pods are tried again
    assert devices_of(placed(view, claimed("p3", claim([exactly("gpus")], uid="c")))) == ["gpu-0"]


def test_a_devices_binding_conditions_travel_in_the_allocation_for_the_binder() -> None:
    attached = {**device(0, "n1"), "bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}
    view = view_with(slice_event("n1", GPU_DRIVER, [attached]))
    (allocation,) = placed(view, claimed("p1", claim([exactly("gpus")]))).claims
    assert allocation.allocation is not None
    (result,) = allocation.allocation.devices.results
    assert (result.binding_conditions, result.binding_failure_conditions) == (("Attached",), ("AttachFailed",))


def test_a_missing_claims_reason_is_kube_schedulers_alone_even_with_nodes_waiting_for_status() -> None:
    view = view_with(slice_event("n1", GPU_DRIVER, [device(0, "n1")]))
    view.apply(topology("no-status-yet", 4))
    why = 'resourceclaim.resource.k8s.io "mine" not found'
    placement = placed(view, claimed("p1", PodClaim(pod_claim_name="gpu", claim_name="mine", waiting=why)))
    assert placement.reason == why
