"""The placer resolves a pending pod's PersistentVolumeClaims against storage.claims / storage.volumes /
storage.classes before deciding (kube-scheduler's VolumeBinding, VolumeZone, VolumeRestrictions), and a
storage change is an event that may help a parked pod.

Before, a pod with claims was placed as if it had none."""

from __future__ import annotations

import msgspec
from placer_builders import FakeClock, lifecycle, pending, status, topology

from schemas import topics
from schemas.events import (
    LifecyclePhase,
    PendingPodEvent,
    PersistentVolumeEvent,
    PlacementEvent,
    PlacementOutcome,
    StorageClassEvent,
    VolumeClaimEvent,
)
from schemas.kube import NodeSelectorRequirement, NodeSelectorTerm
from schemas.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from services.placer.decide import Decider
from services.placer.parking import MAX_BACKOFF_S

ZONE = "topology.kubernetes.io/zone"
GIB = 2**30
ALLOCATABLE = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}


def in_zone(zone: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=ZONE, operator="In", values=(zone,)),)),)


def zonal_cluster() -> tuple[Decider, FakeClock]:
    clock = FakeClock()
    decider = Decider(clock=clock)
    for node, zone in (("a", "z1"), ("b", "z2")):
        decider.on_event(topology(node, 2))
        decider.on_event(status(node, labels={ZONE: zone}, allocatable=ALLOCATABLE))
    decider.on_event(
        StorageClassEvent(storage_class=StorageClass(name="fast", binding_mode="WaitForFirstConsumer"), default=True)
    )
    return decider, clock


def with_claims(pod: PendingPodEvent, *names: str) -> PendingPodEvent:
    return msgspec.structs.replace(pod, volume_claims=names)


def claim(name: str, volume: str = "", modes: tuple[str, ...] = ("ReadWriteOnce",)) -> VolumeClaimEvent:
    return VolumeClaimEvent(
        claim=PersistentVolumeClaim(
            namespace="default",
            name=name,
            volume_name=volume,
            storage_class="fast",
            access_modes=modes,
            request_bytes=GIB,
        )
    )


def volume(name: str, zone: str, claimed_by: str = "") -> PersistentVolumeEvent:
    return PersistentVolumeEvent(
        volume=PersistentVolume(
            name=name,
            storage_class="fast",
            capacity_bytes=2 * GIB,
            access_modes=("ReadWriteOnce",),
            node_terms=in_zone(zone),
            claim=claimed_by,
            labels={ZONE: zone},
        )
    )


def test_a_pod_whose_claim_is_bound_to_a_zonal_volume_lands_in_that_zone() -> None:
    decider, _ = zonal_cluster()
    decider.on_event(volume("pv-z2", "z2", claimed_by="default/data"))
    decider.on_event(claim("data", volume="pv-z2"))
    placement = decider.on_pending(with_claims(pending("p1", 1), "data")).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED
    assert placement.node == "b"


def test_a_pod_whose_claim_is_bound_to_another_zones_volume_is_unschedulable_with_kubes_reason() -> None:
    decider, _ = zonal_cluster()
    decider.on_event(volume("pv-z3", "z3", claimed_by="default/data"))
    decider.on_event(claim("data", volume="pv-z3"))
    placement = decider.on_pending(with_claims(pending("p1", 1), "data")).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason.startswith("0/2 nodes are available: 2 node(s) had volume node affinity conflict.")


def test_a_missing_claim_fails_every_node_with_kubes_words() -> None:
    decider, _ = zonal_cluster()
    placement = decider.on_pending(with_claims(pending("p1", 1), "nope")).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert 'persistentvolumeclaim "nope" not found' in placement.reason


def test_a_parked_pod_is_retried_when_a_volume_appears_and_then_fits() -> None:
    decider, clock = zonal_cluster()
    decider.on_event(claim("data"))  # WaitForFirstConsumer, no provisioner: only a static volume will do
    parked = decider.on_pending(with_claims(pending("p1", 1), "data")).placement
    assert parked is not None and parked.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "didn't find available persistent volumes to bind" in parked.reason
    clock.advance(MAX_BACKOFF_S)

    (follow_up,) = decider.on_event(volume("pv-z1", "z1"))

    assert isinstance(follow_up.placement, PlacementEvent) and follow_up.placement.outcome is PlacementOutcome.PLACED
    assert follow_up.placement.node == "a"


def test_a_read_write_once_pod_claim_in_use_by_a_running_pod_is_freed_when_that_pod_leaves() -> None:
    decider, clock = zonal_cluster()
    decider.on_event(volume("pv-z1", "z1", claimed_by="default/solo"))
    decider.on_event(claim("solo", volume="pv-z1", modes=("ReadWriteOncePod",)))
    holder = msgspec.structs.replace(lifecycle("holder", LifecyclePhase.BOUND, "a"), volume_claims=("solo",))
    decider.on_event(holder)
    parked = decider.on_pending(with_claims(pending("p1", 1), "solo")).placement
    assert parked is not None and parked.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "ReadWriteOncePod" in parked.reason
    clock.advance(MAX_BACKOFF_S)

    (follow_up,) = decider.on_event(lifecycle("holder", LifecyclePhase.DELETED))

    assert isinstance(follow_up.placement, PlacementEvent) and follow_up.placement.node == "a"


def test_a_storage_tombstone_undoes_its_object() -> None:
    decider, _ = zonal_cluster()
    decider.on_event(claim("data"))
    decider.on_tombstone(topics.STORAGE_CLAIMS.name, "default/data")
    placement = decider.on_pending(with_claims(pending("p1", 1), "data")).placement
    assert placement is not None and 'persistentvolumeclaim "data" not found' in placement.reason


def test_a_read_write_once_pod_claim_of_a_pod_placed_but_not_yet_bound_is_in_use() -> None:
    decider, _ = zonal_cluster()
    decider.on_event(volume("pv-z1", "z1", claimed_by="default/solo"))
    decider.on_event(claim("solo", volume="pv-z1", modes=("ReadWriteOncePod",)))
    first = decider.on_pending(with_claims(pending("p1", 1), "solo")).placement
    assert first is not None and first.outcome is PlacementOutcome.PLACED

    second = decider.on_pending(with_claims(pending("p2", 1), "solo")).placement

    assert second is not None and second.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "ReadWriteOncePod" in second.reason
