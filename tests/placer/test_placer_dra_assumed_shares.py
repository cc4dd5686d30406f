"""A share of a shared device decided but not yet written holds its capacity only, not the device."""

from __future__ import annotations

from fractions import Fraction

import msgspec

from schemas.dra import ClaimAllocation, DeviceResult
from schemas.dra_objects import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceSliceSpec,
)
from services.placer.dra_allocation import DraCluster, held_by_others, known_gpus

DEVICE = ("gpu.nvidia.com", "node-a", "gpu-7")


def _assumed(uid: str, *, share: bool) -> ClaimAllocation:
    result = DeviceRequestAllocationResult(
        request="share",
        driver=DEVICE[0],
        pool=DEVICE[1],
        device=DEVICE[2],
        share_id=f"share-{uid}" if share else None,
        consumed_capacity={"memory": "12Gi"} if share else {},
    )
    return ClaimAllocation(
        namespace="default",
        name=f"claim-{uid}",
        uid=uid,
        results=(DeviceResult(request="share", driver=DEVICE[0], pool=DEVICE[1], device=DEVICE[2]),),
        allocation=AllocationResult(devices=DeviceAllocationResult(results=(result,))),
    )


def test_a_decided_share_consumes_its_capacity_and_leaves_the_device_to_other_shares() -> None:
    cluster = DraCluster(slices=(), classes={}, allocated=(), assumed=(_assumed("a", share=True),))
    given = held_by_others(cluster, frozenset())
    assert DEVICE not in given.allocated
    assert given.consumed[DEVICE] == {"gpu.nvidia.com/memory": Fraction(12 * 2**30)}


def test_a_decided_whole_device_is_taken_and_ones_own_claim_is_not_counted() -> None:
    cluster = DraCluster(slices=(), classes={}, allocated=(), assumed=(_assumed("a", share=False),))
    assert DEVICE in held_by_others(cluster, frozenset()).allocated
    assert DEVICE not in held_by_others(cluster, frozenset({"a"})).allocated


def test_a_share_is_reported_as_its_memory_and_no_cores_a_whole_device_as_whole() -> None:
    from engine import NodeState
    from engine.node.dra.model import ObjectMeta, ResourceSlice
    from services.collector.node.topology_files import load_topology

    gpu = next(d for d in load_topology("pcie-8gpu-2socket", node="node-a").devices if d.index == 7)
    device = {"name": DEVICE[2], "attributes": {"uuid": {"string": gpu.uuid}}}
    spec = {"driver": DEVICE[0], "pool": {"name": DEVICE[1]}, "devices": [device]}
    slices = (ResourceSlice(metadata=ObjectMeta(name="s"), spec=msgspec.convert(spec, ResourceSliceSpec)),)
    node = NodeState(name="node-a", devices=(gpu,))
    (shared,) = known_gpus(node, slices, [_assumed("a", share=True)])
    assert (shared.index, shared.memory_mib, shared.cores) == (7, 12 * 1024, 0)
    (whole,) = known_gpus(node, slices, [_assumed("a", share=False)])
    assert (whole.index, whole.memory_mib, whole.cores) == (7, 0, 100)
