"""The placer applies NodeVolumeLimits from storage.csinodes: a node whose CSINode lets a driver attach no
more volumes than its pods (bound, or placed and not yet bound) already use takes no pod with a new volume
of that driver, in kube-scheduler's words; a CSINode that raises its limit helps a parked pod.

Before, the live placer knew no CSINode: it placed the pod on the full node (only `engine place
--cluster` applied the rule)."""

from __future__ import annotations

import msgspec
from placer_builders import FakeClock, lifecycle, pending, status, topology

from schemas import topics
from schemas.events import (
    CsiNodeEvent,
    LifecyclePhase,
    PendingPodEvent,
    PersistentVolumeEvent,
    PlacementEvent,
    PlacementOutcome,
    StorageClassEvent,
    VolumeClaimEvent,
)
from schemas.volumes import CsiVolume, PersistentVolume, PersistentVolumeClaim, StorageClass
from services.placer.decide import Decider
from services.placer.parking import MAX_BACKOFF_S

DRIVER = "ebs.csi.aws.com"
GIB = 2**30
ALLOCATABLE = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}
MAX_VOLUMES = "node(s) exceed max volume count"


def cluster(*limited: str, limit: int = 1) -> tuple[Decider, FakeClock]:
    """Nodes a and b; `limited` nodes' CSINodes let DRIVER attach `limit` volumes; claims c0..c3 bound to
    CSI volumes pv0..pv3 (no node affinity)."""
    clock = FakeClock()
    decider = Decider(clock=clock)
    for node in ("a", "b"):
        decider.on_event(topology(node, 2))
        decider.on_event(status(node, allocatable=ALLOCATABLE))
    decider.on_event(StorageClassEvent(storage_class=StorageClass(name="fast", provisioner=DRIVER)))
    for i in range(4):
        pv = PersistentVolume(
            name=f"pv{i}",
            storage_class="fast",
            capacity_bytes=GIB,
            access_modes=("ReadWriteOnce",),
            claim=f"default/c{i}",
            csi=CsiVolume(driver=DRIVER, handle=f"vol-{i}"),
        )
        decider.on_event(PersistentVolumeEvent(volume=pv))
        claim = PersistentVolumeClaim(
            namespace="default", name=f"c{i}", volume_name=f"pv{i}", storage_class="fast", request_bytes=GIB
        )
        decider.on_event(VolumeClaimEvent(claim=claim))
    for node in limited:
        decider.on_event(CsiNodeEvent(node=node, limits={DRIVER: limit}))
    return decider, clock


def mounting(uid: str, *claims: str) -> PendingPodEvent:
    return msgspec.structs.replace(pending(uid, 1), volume_claims=claims)


def placed_on(decider: Decider, pod: PendingPodEvent) -> PlacementEvent:
    placement = decider.on_pending(pod).placement
    assert isinstance(placement, PlacementEvent)
    return placement


def test_without_a_csinode_the_pod_goes_to_the_first_node() -> None:
    decider, _ = cluster()
    decider.on_event(msgspec.structs.replace(lifecycle("holder", LifecyclePhase.BOUND, "a"), volume_claims=("c0",)))
    assert placed_on(decider, mounting("p1", "c1")).node == "a"


def test_a_node_whose_driver_is_at_its_limit_takes_no_pod_with_a_new_volume() -> None:
    decider, _ = cluster("a")
    decider.on_event(msgspec.structs.replace(lifecycle("holder", LifecyclePhase.BOUND, "a"), volume_claims=("c0",)))
    # a pod that mounts the volume already attached there adds nothing
    assert placed_on(decider, mounting("p1", "c0")).node == "a"
    assert placed_on(decider, mounting("p2", "c1")).node == "b"


def test_every_node_full_is_kubes_reason() -> None:
    decider, _ = cluster("a", "b", limit=0)
    placement = placed_on(decider, mounting("p1", "c1"))
    assert placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason.startswith(f"0/2 nodes are available: 2 {MAX_VOLUMES}.")


def test_a_pod_placed_but_not_yet_bound_counts_its_volumes_on_its_node() -> None:
    decider, _ = cluster("a")
    assert placed_on(decider, mounting("p1", "c1")).node == "a"  # assumed: c1's volume attached to a
    assert placed_on(decider, mounting("p2", "c2")).node == "b"


def test_a_volume_bound_later_counts_on_the_node_of_the_pod_mounting_it() -> None:
    decider, _ = cluster("a")
    decider.on_event(msgspec.structs.replace(lifecycle("holder", LifecyclePhase.BOUND, "a"), volume_claims=("c9",)))
    assert placed_on(decider, mounting("p1", "c1")).node == "a"  # c9 does not exist yet: nothing attached
    decider.on_event(lifecycle("p1", LifecyclePhase.DELETED))
    pv = PersistentVolume(name="pv9", claim="default/c9", csi=CsiVolume(driver=DRIVER, handle="vol-9"))
    decider.on_event(PersistentVolumeEvent(volume=pv))
    decider.on_event(VolumeClaimEvent(claim=PersistentVolumeClaim(namespace="default", name="c9", volume_name="pv9")))
    assert placed_on(decider, mounting("p2", "c2")).node == "b"


def test_a_parked_pod_is_retried_when_a_csinode_raises_its_limit() -> None:
    decider, clock = cluster("a", "b", limit=0)
    parked = placed_on(decider, mounting("p1", "c1"))
    assert parked.outcome is PlacementOutcome.UNSCHEDULABLE
    clock.advance(MAX_BACKOFF_S)

    (follow_up,) = decider.on_event(CsiNodeEvent(node="b", limits={DRIVER: 1}))

    assert isinstance(follow_up.placement, PlacementEvent) and follow_up.placement.node == "b"


def test_a_csinode_tombstone_lifts_its_limits() -> None:
    decider, _ = cluster("a", "b", limit=0)
    decider.on_tombstone(topics.STORAGE_CSINODES.name, "a")
    assert placed_on(decider, mounting("p1", "c1")).node == "a"
