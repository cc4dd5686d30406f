"""Consumable capacity: one device shared by several allocations while its capacity lasts."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import msgspec
import pytest
from dra_builders import DRIVER, claim, device, device_class, exact, run, slice_

from engine.node.dra import AllocationInput, CelPrograms, NodeView, allocate, consumed_by, consumed_capacity
from engine.node.dra.capacity import quantity_text
from engine.node.dra.model import CapacityRequirements, Device, ResourceClaim

GI = 2**30


def shared_gpu(name: str, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    memory: dict[str, Any] = {"value": "80Gi"}
    if policy is not None:
        memory["requestPolicy"] = policy
    return device(name, allowMultipleAllocations=True, capacity={"memory": memory})


def asking(name: str, memory: str) -> dict[str, Any]:
    return exact(name, capacity={"requests": {"memory": memory}})


def test_two_shares_of_one_device_each_with_its_id_and_consumed_capacity() -> None:
    results = run([claim([asking("a", "40Gi"), asking("b", "40Gi")])], [slice_([shared_gpu("g0"), shared_gpu("g1")])])
    assert results is not None
    a, b = results[0].devices.results
    assert (a.device, b.device) == ("g0", "g0")
    assert a.share_id is not None and b.share_id is not None and a.share_id != b.share_id
    assert a.consumed_capacity == {f"{DRIVER}/memory": "40Gi"}


def test_a_share_that_does_not_fit_goes_to_the_next_device_or_nowhere() -> None:
    requests = [asking("a", "40Gi"), asking("b", "50Gi")]
    results = run([claim(requests)], [slice_([shared_gpu("g0"), shared_gpu("g1")])])
    assert results is not None and [r.device for r in results[0].devices.results] == ["g0", "g1"]
    assert run([claim(requests)], [slice_([shared_gpu("g0")])]) is None


def test_shares_in_the_cluster_count_and_an_exclusive_allocation_takes_the_device() -> None:
    slices = (slice_([shared_gpu("g0")]),)
    cluster = {(DRIVER, "pool-1", "g0"): {f"{DRIVER}/memory": Fraction(60 * GI)}}
    classes = {"gpu": device_class()}
    given = AllocationInput(slices=slices, classes=classes, consumed=cluster)
    assert allocate(NodeView(name="node-1"), [claim([asking("a", "40Gi")])], given, CelPrograms()) is None
    fits = allocate(NodeView(name="node-1"), [claim([asking("a", "20Gi")])], given, CelPrograms())
    assert fits is not None
    exclusive = AllocationInput(slices=slices, classes=classes, allocated=frozenset({(DRIVER, "pool-1", "g0")}))
    assert allocate(NodeView(name="node-1"), [claim([asking("a", "1Gi")])], exclusive, CelPrograms()) is None


def test_unasked_capacity_takes_the_default_or_the_whole_device() -> None:
    whole = run([claim([exact("a"), exact("b")])], [slice_([shared_gpu("g0")])])
    assert whole is None  # each share takes all 80Gi
    default = run([claim([exact("a"), exact("b")])], [slice_([shared_gpu("g0", {"default": "40Gi"})])])
    assert default is not None and default[0].devices.results[1].consumed_capacity == {f"{DRIVER}/memory": "40Gi"}


@pytest.mark.parametrize(
    ("policy", "asked", "consumed"),
    [
        ({"validRange": {"min": "10Gi", "step": "10Gi"}}, "15Gi", 20 * GI),
        ({"validRange": {"min": "10Gi"}}, "1Gi", 10 * GI),
        ({"validRange": {"min": "10Gi", "max": "40Gi"}}, "50Gi", None),
        ({"validValues": ["10Gi", "40Gi"]}, "20Gi", 40 * GI),
        ({"validValues": ["10Gi", "40Gi"]}, "41Gi", None),
    ],
)
def test_a_request_is_rounded_by_the_capacitys_policy(policy: dict[str, Any], asked: str, consumed: int | None) -> None:
    gpu = slice_([shared_gpu("g0", policy)]).spec.devices[0]
    found = consumed_by(gpu, DRIVER, CapacityRequirements(requests={"memory": asked}))
    assert (found[f"{DRIVER}/memory"] if found else None) == consumed


def test_a_capacity_the_device_lacks_does_not_fit() -> None:
    assert consumed_by(Device(name="x"), DRIVER, CapacityRequirements(requests={"bandwidth": "1Gi"})) is None


def test_quantities_are_written_in_the_largest_whole_suffix() -> None:
    assert [quantity_text(Fraction(v)) for v in (40 * GI, 2000, 1536, 7, Fraction(1, 2))] == [
        "40Gi",
        "2k",
        "1536",
        "7",
        "500m",
    ]


def test_the_claims_shares_are_read_back_from_the_cluster() -> None:
    allocated = msgspec.convert(
        {
            "metadata": {"name": "other"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "a", "driver": DRIVER, "pool": "p", "device": "g0", "shareID": "x",
                             "consumedCapacity": {"memory": "40Gi"}},
                        ]
                    }
                }
            },
        },
        ResourceClaim,
    )  # fmt: skip
    assert consumed_capacity([allocated, allocated]) == {(DRIVER, "p", "g0"): {f"{DRIVER}/memory": Fraction(80 * GI)}}
