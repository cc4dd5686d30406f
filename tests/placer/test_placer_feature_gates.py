"""The placer's feature gates (TOPOPLACE_FEATURE_GATES), read as `engine place --cluster --feature-gates`:
DRA's gates reach its ResourceClaim allocation, Kueue's TASBalancedPlacement its Kueue gangs.

Before, the live placer always allocated with the newest release's DRA defaults (DRAListTypeAttributes off,
so a selector on a list attribute never matched) and never balanced a Kueue gang."""

from __future__ import annotations

from collections import Counter

import msgspec
from placer_builders import pending, status, topology
from test_placer_dra_allocator import GPU_DRIVER, claim, claimed, device, device_class, exactly, slice_event

from schemas import gangs as gang_keys
from schemas.events import (
    GangPlacementEvent,
    NetworkConstraint,
    PendingGangEvent,
    PlacementEvent,
    PlacementOutcome,
    TopologyLevelsEvent,
    TopologyMode,
)
from services.placer.decide import Decider
from topoplace.feature_gates import FeatureGates

LIST_ATTRIBUTE = "lanes"


def dra_cluster(gates: dict[str, bool]) -> Decider:
    decider = Decider(feature_gates=FeatureGates(gates=gates))
    decider.on_event(topology("n1", 2))
    decider.on_event(status("n1"))
    decider.on_event(device_class("gpus", f'device.driver == "{GPU_DRIVER}"'))
    devices = [device(i, "n1") for i in range(2)]
    devices[1]["attributes"][LIST_ATTRIBUTE] = {"ints": [0, 1]}  # a list-type attribute (KEP-5491)
    decider.on_event(slice_event("n1", GPU_DRIVER, devices))
    return decider


def with_two_lanes(decider: Decider) -> PlacementEvent:
    lanes = f'device.attributes["{GPU_DRIVER}"].{LIST_ATTRIBUTE}'
    selector = {"cel": {"expression": f"has({lanes}) && {lanes}.exists(l, l == 1)"}}
    pod = claimed("p1", claim([exactly("gpus", 1, selectors=[selector])]))
    placement = decider.on_pending(pod).placement
    assert placement is not None
    return placement


def test_dra_list_type_attributes_on_lets_a_selector_read_a_list_attribute() -> None:
    placement = with_two_lanes(dra_cluster({"DRAListTypeAttributes": True}))
    assert placement.outcome is PlacementOutcome.PLACED, placement.reason
    assert [r.device for c in placement.claims for r in c.results] == ["gpu-1"]


def test_by_default_list_type_attributes_are_not_read_as_in_kubernetes() -> None:
    placement = with_two_lanes(dra_cluster({}))
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "cannot allocate all claims" in placement.reason


def test_dra_gates_off_by_name_change_the_allocation() -> None:
    decider = Decider(feature_gates=FeatureGates(gates={"DRADeviceTaints": False}))
    decider.on_event(topology("n1", 1))
    decider.on_event(status("n1"))
    decider.on_event(device_class("gpus", f'device.driver == "{GPU_DRIVER}"'))
    decider.on_event(slice_event("n1", GPU_DRIVER, [device(0, "n1", taint=True)]))
    placement = decider.on_pending(claimed("p1", claim([exactly("gpus")]))).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED  # taints not read, as upstream


def test_dra_gates_reach_a_gang_members_claims_too() -> None:
    # The gang's claims are allocated with the placer's gates as a single pod's are: with DRADeviceTaints
    # off, the tainted GPU is no obstacle for a gang member either.
    decider = Decider(feature_gates=FeatureGates(gates={"DRADeviceTaints": False}))
    decider.on_event(topology("n1", 1))
    decider.on_event(status("n1"))
    decider.on_event(device_class("gpus", f'device.driver == "{GPU_DRIVER}"'))
    decider.on_event(slice_event("n1", GPU_DRIVER, [device(0, "n1", taint=True)]))
    member = claimed("p1", claim([exactly("gpus")]))
    gang = PendingGangEvent(name="default/job", namespace="default", min_member=1, members=(member,))
    placement = decider.on_gang(gang).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement.reason


# Kueue's "balanced placement; basic" case: two 15-CPU nodes in two racks of a block, 25 one-CPU pods, rack
# preferred. Kueue's best fit fills the roomiest rack first (15 + 10); balanced placement spreads them (13 + 12).
BLOCK, RACK, HOST = "cloud.example.com/block", "cloud.example.com/rack", "kubernetes.io/hostname"


def kueue_cluster(gates: dict[str, bool]) -> Decider:
    decider = Decider(feature_gates=FeatureGates(gates=gates))
    decider.on_event(TopologyLevelsEvent(name="default", levels=(BLOCK, RACK, HOST)))
    for i in (1, 2):
        node = f"x{i}"
        decider.on_event(topology(node, 0))
        labels = {BLOCK: "b1", RACK: f"r{i}", HOST: node}
        decider.on_event(status(node, labels=labels, allocatable={"cpu": "15", "memory": "64Gi", "pods": "30"}))
    return decider


def kueue_gang(source: str = "kueue") -> PendingGangEvent:
    annotations = {gang_keys.KUEUE_GROUP: "job", gang_keys.KUEUE_TOTAL: "25", gang_keys.KUEUE_PREFERRED: RACK}
    members = tuple(
        msgspec.structs.replace(pending(f"w{i:02d}", 0), requests={"cpu": "1"}, annotations=annotations)
        for i in range(25)
    )
    return PendingGangEvent(
        name="default/job",
        namespace="default",
        min_member=25,
        network=NetworkConstraint(mode=TopologyMode.SOFT, highest_tier_name=RACK),
        members=members,
        source=source,
    )


def per_node(decider: Decider, gang: PendingGangEvent) -> dict[str, int]:
    placement = decider.on_gang(gang).placement
    assert isinstance(placement, GangPlacementEvent) and placement.outcome is PlacementOutcome.PLACED
    return dict(sorted(Counter(m.node for m in placement.members).items()))


def test_kueues_balanced_placement_gate_balances_a_kueue_gang() -> None:
    assert per_node(kueue_cluster({"TASBalancedPlacement": True}), kueue_gang()) == {"x1": 13, "x2": 12}


def test_without_the_gate_a_kueue_gang_gets_kueues_best_fit() -> None:
    assert per_node(kueue_cluster({}), kueue_gang()) == {"x1": 15, "x2": 10}
    assert per_node(kueue_cluster({"TASBalancedPlacement": False}), kueue_gang()) == {"x1": 15, "x2": 10}


def test_kueues_gate_leaves_other_frameworks_gangs_alone() -> None:
    assert per_node(kueue_cluster({"TASBalancedPlacement": True}), kueue_gang("podgroup")) == {"x1": 15, "x2": 10}
