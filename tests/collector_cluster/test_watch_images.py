"""What ImageLocality reads, streamed to the placer: a node's `status.images` (names and sizeBytes only) on
nodes.status, and a pending pod's container images (init containers first) on pods.pending, read as
`engine place --cluster` reads them.

Before, neither was streamed: the live placer scored every node alike for images."""

from __future__ import annotations

from typing import Any

import msgspec
from cluster_objects import node_json, pod

from schemas.events import NodeImage
from services.collector.cluster import translate as tr
from services.collector.cluster.objects import Node
from topoplace.cluster_objects.files import ClusterObject
from topoplace.cluster_objects.nodes import node_from_object

MIB = 2**20


def with_images(*images: tuple[list[str], int]) -> dict[str, Any]:
    body = node_json("n1")
    body["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return body


def test_a_node_carries_its_images_names_and_sizes_only() -> None:
    body = with_images((["registry.example/train@sha256:ab", "registry.example/train:v1"], 900 * MIB))
    body["status"]["images"][0]["extra"] = "ignored"
    event, problems = tr.node_status_event(msgspec.convert(body, Node), 1.0)
    assert problems == []
    assert event.images == (
        NodeImage(names=("registry.example/train@sha256:ab", "registry.example/train:v1"), size_bytes=900 * MIB),
    )
    # engine place --cluster reads the same Node alike
    assert node_from_object(ClusterObject(kind="Node", where="f.json", body=body)).images == event.images


def test_an_image_with_a_negative_size_is_named_and_left_out() -> None:
    body = with_images((["a:1"], -1), (["b:1"], 5))
    event, problems = tr.node_status_event(msgspec.convert(body, Node), 1.0)
    assert [(p.object, p.field, p.reason) for p in problems] == [
        ("n1", "status.images[0].sizeBytes", "must not be negative")
    ]
    assert event.images == (NodeImage(names=("b:1",), size_bytes=5),)


def test_a_pending_pod_carries_its_init_containers_and_containers_images() -> None:
    web = pod(
        "web",
        init_containers=[{"name": "setup", "image": "busybox:1.36"}],
        containers=[{"name": "main", "image": "nginx:1.27"}, {"name": "log", "image": "fluentd"}],
    )
    event, _ = tr.pending_event(web, 1.0)
    assert event.images == ("busybox:1.36", "nginx:1.27", "fluentd")
