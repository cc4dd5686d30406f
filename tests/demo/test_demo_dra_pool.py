"""The demo's DRA pool, read by the structured allocator: partitions, shares, GPU + NIC on one root, a taint."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from engine.node.dra import AllocationInput, CelPrograms, NodeView, allocate
from engine.node.dra.model import DeviceClass, ObjectMeta, ResourceClaim, ResourceClaimSpec, ResourceSlice
from topoplace.dev.demo import cluster, dra, dra_pool

SEED = dra_pool.seed_objects(cluster.default_cluster(), "default")
FIRST, SECOND = (n.name for n in dra_pool.dra_nodes(cluster.default_cluster())[:2])
GIVEN = AllocationInput(
    slices=tuple(msgspec.convert(s, ResourceSlice) for s in SEED.slices),
    classes={c["metadata"]["name"]: msgspec.convert(c, DeviceClass) for c in SEED.device_classes},
)
ATTRIBUTES = {
    dra_pool.device_id(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): d["attributes"]
    for s in SEED.slices
    for d in s["spec"].get("devices", [])
}


def _claims(template: str, count: int) -> list[ResourceClaim]:
    (body,) = [t for t in SEED.templates if t["metadata"]["name"] == template]
    spec = msgspec.convert(body["spec"]["spec"], ResourceClaimSpec)
    return [ResourceClaim(metadata=ObjectMeta(name=f"c{i}", uid=f"u{i}"), spec=spec) for i in range(count)]


def _allocated(node: str, claims: list[ResourceClaim]) -> list[list[str]] | None:
    results = allocate(NodeView(name=node), claims, GIVEN, CelPrograms())
    if results is None:
        return None
    return [[dra_pool.device_id(r.driver, r.pool, r.device) for r in a.devices.results] for a in results]


def _attribute(device: str, name: str) -> Any:
    return next(iter(ATTRIBUTES[device][name].values()))


def test_every_object_is_a_resource_k8s_io_v1_object_the_allocator_reads() -> None:
    assert [c["metadata"]["name"] for c in SEED.device_classes] == [dra.DRIVER, dra_pool.MIG_CLASS, dra_pool.NIC_DRIVER]
    assert {t["metadata"]["name"] for t in SEED.templates} == set(dra_pool.TEMPLATES)
    assert all(o["apiVersion"] == "resource.k8s.io/v1" for o in SEED.device_classes + SEED.slices + SEED.templates)
    drivers = {(s["spec"]["driver"], s["spec"]["nodeName"]) for s in SEED.slices}
    assert {
        (dra_pool.NIC_DRIVER, FIRST),
        (dra_pool.NIC_DRIVER, SECOND),
        (dra.DRIVER, FIRST),
        (dra.DRIVER, SECOND),
    } <= drivers


def test_partitions_take_their_gpus_counters_so_a_partitioned_gpu_is_not_given_whole() -> None:
    (mig,) = _allocated(SECOND, _claims(dra_pool.MIG_TEMPLATE, 1)) or pytest.fail("no partition")
    assert [(_attribute(d, "type"), _attribute(d, "profile")) for d in mig] == [("mig", "1g.12gb")]
    assert _allocated(FIRST, _claims(dra_pool.MIG_TEMPLATE, 1)) is None  # only the second node partitions
    assert _allocated(SECOND, _claims(dra_pool.MIG_TEMPLATE, 32)) is not None  # 8 GPUs of 4 slices
    every_gpu = {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": dra.DRIVER, "count": 8}}]}}
    whole = ResourceClaim(
        metadata=ObjectMeta(name="whole", uid="whole"), spec=msgspec.convert(every_gpu, ResourceClaimSpec)
    )
    assert _allocated(SECOND, [whole]) is not None
    assert _allocated(SECOND, [whole, *_claims(dra_pool.MIG_TEMPLATE, 1)]) is None  # whole GPUs leave no counters


def test_the_shared_gpu_holds_four_shares_of_its_memory() -> None:
    shares = _allocated(FIRST, _claims(dra_pool.SHARE_TEMPLATE, 4)) or pytest.fail("no shares")
    assert [devices for devices in shares] == [list(SEED.shared)] * 4
    assert _allocated(FIRST, _claims(dra_pool.SHARE_TEMPLATE, 5)) is None  # 5 x 12Gi > 48Gi


def test_a_gpu_and_a_nic_are_given_on_one_pcie_root() -> None:
    for node in (FIRST, SECOND):
        (pair,) = _allocated(node, _claims(dra_pool.GPU_NIC_TEMPLATE, 1)) or pytest.fail(node)
        assert sorted(d.split("/")[0] for d in pair) == [dra_pool.NIC_DRIVER, dra.DRIVER]
        assert len({_attribute(d, dra.PCIE_ROOT) for d in pair}) == 1


def test_the_tainted_gpu_is_never_given() -> None:
    (tainted,) = SEED.tainted
    whole = _allocated(FIRST, _claims(dra.TEMPLATE, 3)) or pytest.fail("no pairs")
    assert len(whole) == 3 and tainted not in {d for devices in whole for d in devices}
    assert _allocated(FIRST, _claims(dra.TEMPLATE, 4)) is None  # 8 GPUs less the tainted one: 3 pairs
