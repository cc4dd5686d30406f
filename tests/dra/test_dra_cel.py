"""The CEL environment of DRA selectors: device fields, quantity, semver, strings, bounds, errors."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.memo import Memo
from engine.node.dra.cel_programs import (
    MAX_EXPRESSION_LENGTH,
    CelPrograms,
    SelectorError,
    compile_selector,
    device_activation,
    evaluate,
)
from engine.node.dra.model import Device

DEVICE = msgspec.convert(
    {
        "name": "gpu-0",
        "attributes": {
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "index": {"int": 3},
            "mig": {"bool": False},
            "driverVersion": {"version": "550.54.15"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    },
    Device,
)


def holds(expression: str) -> bool:
    return evaluate(compile_selector(expression), device_activation("gpu.nvidia.com", DEVICE))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.nvidia.com"', True),
        ('device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"', True),
        ('device.attributes["gpu.nvidia.com"]["index"] == 3', True),
        ('device.attributes["gpu.nvidia.com"].index != 3', False),
        ('device.attributes["gpu.nvidia.com"].mig == false', True),
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', True),
        ('"other.example.com" in device.attributes', False),
        ('has(device.attributes["gpu.nvidia.com"].productName)', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) > 0', True),
        ('device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80Gi"))', False),
        ('device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("81Gi"))', True),
        ('device.capacity["gpu.nvidia.com"].memory == quantity("80Gi")', True),
        ('quantity("1.5").isInteger()', False),
        ('quantity("1k").asInteger() == 1000', True),
        ('quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")', True),
        ('quantity("-1").sign() == -1', True),
        ('isQuantity("1Gi") && !isQuantity("one")', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.major() == 550', True),
        ('semver("1.2.3-rc.1").compareTo(semver("1.2.3")) < 0', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        ('device.attributes["gpu.nvidia.com"].productName.lowerAscii().startsWith("nvidia h100")', True),
        ('device.attributes["gpu.nvidia.com"].productName.split(" ")[1] == "H100"', True),
        ('device.attributes["gpu.nvidia.com"].productName.matches("H1[0-9]0")', True),
        ('device.attributes["gpu.nvidia.com"].productName.indexOf("H100") == 7', True),
        ('["a", "b"].join("-") == "a-b"', True),
        ('[3, 1].exists(x, x == device.attributes["gpu.nvidia.com"].index)', True),
        ('device.attributes["gpu.nvidia.com"].index == true', False),  # heterogeneous: unequal, no error
        ('device.attributes["gpu.nvidia.com"].index != "3"', True),
        ("3 == 3.0 && 3u == 3", True),
    ],
)
def test_the_device_environment(expression: str, expected: bool) -> None:
    assert holds(expression) is expected


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ('device.attributes["other.example.com"].name == "x"', "CEL runtime error"),
        ('quantity("one") == quantity("1")', "quantities must match"),
        ('semver("1.2") == semver("1.2.0")', "could not parse '1.2' as semver"),
        ("device.driver", "could not be converted to bool"),
        ("device.driver ==", "CEL compile error: compilation failed"),
        ("(" * 300 + "true" + ")" * 300, "nested more than 250 deep"),
        ("true || " * (MAX_EXPRESSION_LENGTH // 8 + 1) + "true", "characters, more than 10240"),
    ],
)
def test_errors_are_selector_errors(expression: str, error: str) -> None:
    with pytest.raises(SelectorError, match=error):
        holds(expression)


def test_a_costly_comprehension_is_refused_when_compiled() -> None:
    wide = "[" + ",".join(["1"] * 200) + "]"
    compiled = compile_selector(f"{wide}.all(x, {wide}.all(y, {wide}.exists(z, x == y)))")
    assert "estimated cost" in compiled.error and "exceeds the limit of 1000000" in compiled.error
    assert compile_selector(f"{wide}.all(x, x == 1)").error == ""


def test_each_expression_is_compiled_once_into_the_callers_table() -> None:
    memo = Memo()
    programs = CelPrograms(memo.table(8))
    first = programs.get("device.driver == 'x'")
    assert programs.get("device.driver == 'x'") is first
    assert memo.entries() == 1
    memo.clear()
    assert programs.get("device.driver == 'x'") is not first


@given(st.integers(min_value=-(2**40), max_value=2**40), st.integers(min_value=-(2**40), max_value=2**40))
def test_quantity_compare_to_agrees_with_the_numbers(a: int, b: int) -> None:
    expected = (a > b) - (a < b)
    got = evaluate(compile_selector(f'quantity("{a}").compareTo(quantity("{b}")) == {expected}'), {})
    assert got is True


def test_what_a_selector_selected_is_kept_per_device_object_in_the_engines_memo() -> None:
    from engine import Engine

    engine = Engine()
    programs = engine.dra_programs
    expression = 'device.attributes["gpu.nvidia.com"].index == 3'
    assert programs.selects(expression, "gpu.nvidia.com", DEVICE) is True
    kept = engine.memo.entries()
    assert programs.selects(expression, "gpu.nvidia.com", DEVICE) is True
    assert engine.memo.entries() == kept  # the second answer came from the table
    twin = msgspec.structs.replace(DEVICE, name="gpu-0")  # equal, but another object: asked afresh
    assert programs.selects(expression, "gpu.nvidia.com", twin) is True
    assert engine.memo.entries() == kept + 1
    engine.memo.clear()
    assert engine.memo.entries() == 0
