"""The live placer scores ImageLocality from nodes.status `images` and the pending pod's `images`, as
`engine place --cluster` does: a pod without devices goes to the node that already holds its image.

Before, the placer knew no node's images: both nodes scored alike and the first by name won."""

from __future__ import annotations

import msgspec
from placer_builders import status, topology

from schemas.events import NodeImage, PendingPodEvent, PlacementEvent, PlacementOutcome
from services.placer.decide import Decider

MIB = 2**20
ALLOCATABLE = {"cpu": "8", "memory": "32Gi", "pods": "110"}
IMAGE = "registry.example/train:v1"


def cluster(images_on_b: tuple[NodeImage, ...]) -> Decider:
    decider = Decider()
    for node in ("a", "b"):
        decider.on_event(topology(node, 0))
        held = images_on_b if node == "b" else ()
        decider.on_event(status(node, allocatable=ALLOCATABLE, images=held))
    return decider


def web(images: tuple[str, ...]) -> PendingPodEvent:
    return PendingPodEvent(
        uid="p1", namespace="default", name="web", resource_version="1", requests={"cpu": "1"}, images=images
    )


def node_for(decider: Decider, pod: PendingPodEvent) -> str | None:
    placement = decider.on_pending(pod).placement
    assert isinstance(placement, PlacementEvent) and placement.outcome is PlacementOutcome.PLACED
    return placement.node


def test_a_pod_goes_to_the_node_holding_its_image() -> None:
    decider = cluster((NodeImage(names=(IMAGE,), size_bytes=900 * MIB),))
    assert node_for(decider, web((IMAGE,))) == "b"


def test_without_images_the_nodes_score_alike() -> None:
    assert node_for(cluster(()), web((IMAGE,))) == "a"
    held = (NodeImage(names=(IMAGE,), size_bytes=900 * MIB),)
    assert node_for(cluster(held), web(())) == "a"  # a pod that names no image: nothing to prefer


def test_a_node_changing_its_images_changes_the_answer() -> None:
    decider = cluster(())
    decider.on_event(status("a", allocatable=ALLOCATABLE, images=(NodeImage(names=(IMAGE,), size_bytes=1),)))
    big = (NodeImage(names=(IMAGE,), size_bytes=900 * MIB),)
    decider.on_event(msgspec.structs.replace(status("b", allocatable=ALLOCATABLE), images=big))
    assert node_for(decider, web((IMAGE,))) == "b"  # a small image scores less (the 23 MiB floor)
