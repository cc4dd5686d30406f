"""kube-scheduler's ImageLocality score (imagelocality/image_locality.go): prefer nodes that already hold
the pod's images, big images more, images few nodes hold less.

Per container (init containers and containers) whose image the node holds: the image's size times the
share of all nodes that hold it (the spread factor, so that a pod does not pile onto the one node that has
an image). The sum is clamped to [23 MiB, 1000 MiB x containers] and scaled to 0..100. An image name without
a tag (nothing after the last ":" that follows the last "/") is `<name>:latest`, as kube normalises it;
node.status.images names are taken as the kubelet reports them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from engine.core.model import NodeImage

MIB = 1024 * 1024
MIN_THRESHOLD = 23 * MIB
MAX_CONTAINER_THRESHOLD = 1000 * MIB
MAX_NODE_SCORE = 100


def normalized_image_name(name: str) -> str:
    if name.rfind(":") <= name.rfind("/"):
        return f"{name}:latest"
    return name


def image_sizes(images: Iterable[NodeImage]) -> dict[str, int]:
    """The node's images by each of their names (kube's ImageStates)."""
    return {name: image.size_bytes for image in images for name in image.names}


def scaled_image_score(size_bytes: int, nodes_with_image: int, total_nodes: int) -> int:
    return int(size_bytes * (nodes_with_image / total_nodes))


def image_priority(sum_scores: int, containers: int) -> int:
    """kube's calculatePriority: the summed scaled sizes, clamped and scaled to 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * containers
    clamped = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    """One pod's images against the cluster's nodes; `nodes_holding` counts each image's nodes."""

    def __init__(self, images: Sequence[str], nodes_holding: Mapping[str, int], total_nodes: int) -> None:
        self.images = tuple(normalized_image_name(i) for i in images)
        self.nodes_holding = nodes_holding
        self.total_nodes = total_nodes

    def score(self, sizes: Mapping[str, int]) -> int:
        """The node's score (0..100), `sizes` its images by name."""
        if not self.images or self.total_nodes == 0:
            return 0
        total = 0
        for image in self.images:
            size = sizes.get(image)
            if size is not None:
                total += scaled_image_score(size, self.nodes_holding.get(image, 0), self.total_nodes)
        return image_priority(total, len(self.images))


def nodes_holding(images: Sequence[str], every_node_images: Iterable[tuple[NodeImage, ...]]) -> dict[str, int]:
    """How many nodes hold each of `images` (normalised names), over every node of the cluster."""
    wanted = {normalized_image_name(i) for i in images}
    counts = dict.fromkeys(wanted, 0)
    for node_images in every_node_images:
        held = {name for image in node_images for name in image.names} & wanted
        for name in held:
            counts[name] += 1
    return counts
