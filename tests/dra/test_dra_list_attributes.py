"""List-type device attributes (KEP-5491, gate DRAListTypeAttributes): CEL, matchAttribute, distinctAttribute."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.node.dra import AllocationInput, CelPrograms, Features, allocate
from engine.node.dra.cel_programs import SelectorError, compile_selector, device_activation, evaluate
from engine.node.dra.model import AllocationResult, Device, ResourceClaim, ResourceSlice
from tests.dra.dra_builders import NODE, claim, device, device_class, exact, picked, slice_

ROOT = "resource.kubernetes.io/pcieRoot"
LISTS = Features(DRAListTypeAttributes=True)
CPU = msgspec.convert(
    {
        "name": "cpu-0",
        "attributes": {
            ROOT: {"strings": ["pci0000:01", "pci0000:02"]},
            "numa": {"ints": [0, 1]},
            "smt": {"bools": [True]},
            "microcode": {"versions": ["1.2.0", "2.0.0"]},
            "socket": {"int": 0},
        },
    },
    Device,
)


def holds(expression: str, lists: bool = True) -> bool:
    return evaluate(compile_selector(expression), device_activation("cpu.example.com", CPU, lists))


def allocate_with(
    claims: list[ResourceClaim], slices: list[ResourceSlice], features: Features = LISTS, classes: Any = None
) -> tuple[AllocationResult, ...] | None:
    given_ = AllocationInput(
        slices=tuple(slices),
        classes={c.metadata.name: c for c in (classes or [device_class()])},
        features=features,
    )
    return allocate(NODE, claims, given_, CelPrograms())


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('"pci0000:02" in device.attributes["resource.kubernetes.io"].pcieRoot', True),
        ('device.attributes["resource.kubernetes.io"].pcieRoot.exists(r, r.endsWith(":03"))', False),
        ('size(device.attributes["cpu.example.com"].numa) == 2', True),
        ('device.attributes["cpu.example.com"].numa == [0, 1]', True),
        ('device.attributes["cpu.example.com"].smt.all(b, b)', True),
        ('device.attributes["cpu.example.com"].microcode.exists(v, v.isGreaterThan(semver("1.9.0")))', True),
        ('device.attributes["cpu.example.com"].numa.includes(1)', True),
        ('device.attributes["cpu.example.com"].numa.includes(2)', False),
        ('device.attributes["cpu.example.com"].numa.includes("1")', False),  # an int is never a string
        ('device.attributes["cpu.example.com"].socket.includes(0)', True),  # a scalar includes itself
        ('device.attributes["cpu.example.com"].socket.includes(1)', False),
        ('device.attributes["resource.kubernetes.io"].pcieRoot.includes("pci0000:01")', True),
    ],
)
def test_a_list_attribute_is_a_typed_list_in_cel_and_includes_reads_lists_and_scalars(
    expression: str, expected: bool
) -> None:
    assert holds(expression) is expected


def test_without_the_gate_a_list_attribute_is_absent_not_an_error() -> None:
    assert holds('has(device.attributes["cpu.example.com"].numa)') is True
    assert holds('has(device.attributes["cpu.example.com"].numa)', lists=False) is False
    assert holds('device.attributes["cpu.example.com"].socket == 0', lists=False) is True
    with pytest.raises(SelectorError, match="no such member"):
        holds('device.attributes["cpu.example.com"].numa.includes(0)', lists=False)


def test_a_list_attribute_is_read_from_a_slice_and_written_back_with_its_kubernetes_names() -> None:
    body = {"name": "d", "attributes": {"a": {"ints": [1, 2]}, "b": {"versions": ["1.0.0"]}}}
    decoded = msgspec.convert(body, Device)
    assert decoded.attributes["a"].ints == (1, 2)
    assert msgspec.json.decode(msgspec.json.encode(decoded)) == body


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("cel.bind(x, 2, x * x) == 4", True),
        ("cel.bind(x, 1, cel.bind(x, 2, x)) == 2", True),  # the inner name shadows the outer
        ("cel.bind(x, 2, cel.bind(y, x + 1, x * y)) == 6", True),
        ('cel.bind(a, device.attributes["cpu.example.com"], a.socket == 0 && a.numa.includes(1))', True),
        ('cel.bind(roots, device.attributes["resource.kubernetes.io"].pcieRoot, roots.all(r, r in roots))', True),
        ("[1, 2].exists(x, cel.bind(y, x * 10, y == 20))", True),
    ],
)
def test_cel_bind_binds_a_name_to_a_value_for_its_body(expression: str, expected: bool) -> None:
    assert holds(expression) is expected


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("cel.bind(x.y, 1, true)", "variable names must be simple identifiers"),
        ("cel.bind(x, 1)", "takes 3 arguments"),
    ],
)
def test_a_bad_cel_bind_is_a_compile_error(expression: str, error: str) -> None:
    compiled = compile_selector(expression)
    assert error in compiled.error
    with pytest.raises(SelectorError, match="CEL compile error"):
        holds(expression)


def test_cel_bind_costs_its_body_once() -> None:
    long_list = "[" + ",".join(["1"] * 1000) + "]"
    body = f"{long_list}.all(a, {long_list}.all(b, a == b))"  # 1000 x 1000 x a few: over the limit
    assert "estimated cost" in compile_selector(body).error
    assert compile_selector(f"cel.bind(xs, {long_list}, xs.all(a, a == 1))").error == ""


def _roots(name: str, *values: str) -> dict[str, Any]:
    value: dict[str, Any] = {"string": values[0]} if len(values) == 1 and not name.startswith("l") else {}
    return device(name, attributes={ROOT: value or {"strings": list(values)}})


def test_match_attribute_is_a_non_empty_intersection_of_list_and_scalar_values() -> None:
    # KEP-5491's story: a CPU near two roots, a GPU and a NIC each on one, all three on a common root
    cpus = slice_([_roots("lcpu-0", "r1", "r2"), _roots("lcpu-1", "r3", "r4")], driver="cpu.example.com", pool="c")
    gpus = slice_([_roots("gpu-0", "r3")], driver="gpu.example.com", pool="g")
    nics = slice_([_roots("nic-0", "r9"), _roots("nic-1", "r3")], driver="nic.example.com", pool="n")
    classes = [device_class(k, (f'device.driver == "{k}.example.com"',)) for k in ("cpu", "gpu", "nic")]
    asked = claim([exact("cpu", 1, "cpu"), exact("gpu", 1, "gpu"), exact("nic", 1, "nic")], [{"matchAttribute": ROOT}])
    found = allocate_with([asked], [cpus, gpus, nics], classes=classes)
    assert picked(found) == [[("cpu", "lcpu-1"), ("gpu", "gpu-0"), ("nic", "nic-1")]]
    # without the gate the CPUs' roots are not read: no CPU has the attribute
    assert allocate_with([asked], [cpus, gpus, nics], Features(), classes) is None


def test_match_attribute_needs_one_value_common_to_all_not_to_each_pair() -> None:
    ring = [_roots("l0", "a", "b"), _roots("l1", "b", "c"), _roots("l2", "c", "a")]
    match = [{"matchAttribute": ROOT}]
    assert allocate_with([claim([exact("req", 3)], match)], [slice_(ring)]) is None
    hub = [*ring, _roots("l3", "a")]
    assert picked(allocate_with([claim([exact("req", 3)], match)], [slice_(hub)])) == [
        [("req", "l0"), ("req", "l2"), ("req", "l3")]
    ]


def test_distinct_attribute_is_pairwise_disjoint() -> None:
    devices = [_roots("l0", "a", "b"), _roots("l1", "b", "c"), _roots("l2", "c"), _roots("one", "a")]
    distinct = [{"distinctAttribute": ROOT}]
    assert picked(allocate_with([claim([exact("req", 2)], distinct)], [slice_(devices)])) == [
        [("req", "l0"), ("req", "l2")]
    ]
    assert allocate_with([claim([exact("req", 3)], distinct)], [slice_(devices)]) is None  # only 3 values in all


def test_a_scalar_and_a_list_of_another_type_never_match() -> None:
    devices = [device("d0", attributes={"v": {"int": 1}}), device("d1", attributes={"v": {"strings": ["1"]}})]
    match = [{"matchAttribute": "gpu.example.com/v"}]
    assert allocate_with([claim([exact("req", 2)], match)], [slice_(devices)]) is None


SETS = st.lists(st.frozensets(st.sampled_from("abcd"), min_size=1, max_size=3), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(sets=SETS, count=st.integers(1, 3), distinct=st.booleans())
def test_the_search_finds_devices_exactly_when_some_set_of_them_satisfies_the_constraint(
    sets: list[frozenset[str]], count: int, distinct: bool
) -> None:
    devices = [device(f"d{i}", attributes={"r": {"strings": sorted(s)}}) for i, s in enumerate(sets)]
    kind = "distinctAttribute" if distinct else "matchAttribute"
    found = allocate_with([claim([exact("req", count)], [{kind: "gpu.example.com/r"}])], [slice_(devices)])

    def ok(chosen: tuple[frozenset[str], ...]) -> bool:
        if distinct:
            return all(a.isdisjoint(b) for a, b in combinations(chosen, 2))
        return bool(frozenset.intersection(*chosen))

    assert (found is not None) == any(ok(c) for c in combinations(sets, count))
    if found is not None:
        chosen = tuple(sets[int(r.device[1:])] for r in found[0].devices.results)
        assert ok(chosen)
