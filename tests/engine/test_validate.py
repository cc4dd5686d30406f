"""validate_snapshot: the checks `engine place` runs on a snapshot from a file, each naming its field."""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import gpu, node, snapshot

from engine import Allocation, RequestError, Snapshot
from engine.core.validate import validate_snapshot
from schemas.topology import Link


def two_gpu_cluster() -> Snapshot:
    return snapshot(node("a", [gpu(0), gpu(1)], links=[Link(src=0, dst=1, nvlinks=2), Link(src=1, dst=0, nvlinks=2)]))


def test_a_consistent_snapshot_passes() -> None:
    validate_snapshot(two_gpu_cluster())


def broken(**node_changes: object) -> Snapshot:
    cluster = two_gpu_cluster()
    return msgspec.structs.replace(cluster, nodes=(msgspec.structs.replace(cluster.nodes[0], **node_changes),))


@pytest.mark.parametrize(
    ("cluster", "field", "reason"),
    [
        (broken(devices=(gpu(0), gpu(0))), "snapshot.nodes[0].devices[1].index", "device 0 appears twice"),
        (broken(links=(Link(src=0, dst=7, nvlinks=1),)), "snapshot.nodes[0].links[0].dst", "no device 7"),
        (broken(links=(Link(src=9, dst=0, nvlinks=1),)), "snapshot.nodes[0].links[0].src", "no device 9"),
        (broken(links=(Link(src=1, dst=1, nvlinks=1),)), "snapshot.nodes[0].links[0]", "cannot link to itself"),
        (
            broken(allocations=(Allocation(pod_uid="p", index=5),)),
            "snapshot.nodes[0].allocations[0].index",
            "no device 5",
        ),
        (
            broken(allocations=(Allocation(pod_uid="p", index=0, memory_mib=-10),)),
            "snapshot.nodes[0].allocations[0].memory_mib",
            "must not be negative",
        ),
        (
            broken(devices=(gpu(0), gpu(1, memory=-1))),
            "snapshot.nodes[0].devices[1].memory_mib",
            "must not be negative",
        ),
        (broken(name=""), "snapshot.nodes[0].name", "must not be empty"),
    ],
    ids=[
        "duplicate-index",
        "link-dst-missing",
        "link-src-missing",
        "self-link",
        "allocation-on-missing-device",
        "negative-allocation-memory",
        "negative-device-memory",
        "empty-name",
    ],
)
def test_each_inconsistency_names_its_field(cluster: Snapshot, field: str, reason: str) -> None:
    with pytest.raises(RequestError) as caught:
        validate_snapshot(cluster)
    assert caught.value.field == field
    assert reason in caught.value.reason


def test_two_nodes_of_one_name_are_refused() -> None:
    cluster = two_gpu_cluster()
    with pytest.raises(RequestError) as caught:
        validate_snapshot(msgspec.structs.replace(cluster, nodes=cluster.nodes * 2))
    assert caught.value.field == "snapshot.nodes[1].name"
