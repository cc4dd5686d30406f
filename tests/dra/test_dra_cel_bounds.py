"""A selector is a tenant's text: compiling and evaluating it is bounded and every refusal is a SelectorError."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.node.dra.cel_programs import (
    MAX_EXPRESSION_LENGTH,
    MAX_NESTING,
    SelectorError,
    compile_selector,
    device_activation,
    evaluate,
)
from engine.node.dra.model import Device

DRIVER = "gpu.nvidia.com"
INDEX = f'device.attributes["{DRIVER}"].index'
DEVICE = msgspec.convert({"name": "gpu-0", "attributes": {"index": {"int": 1}, "type": {"string": "gpu"}}}, Device)


def holds(expression: str) -> bool:
    return evaluate(compile_selector(expression), device_activation(DRIVER, DEVICE))


def test_integer_literals_past_int64_are_selector_errors_not_crashes() -> None:
    for literal in ("9" * 5000, str(2**63)):
        with pytest.raises(SelectorError):
            holds(f"{INDEX} == {literal}")
    assert holds(f"{INDEX} != {2**63 - 1}") and holds(f"{INDEX} != -{2**63}")


@pytest.mark.timeout(20)
def test_deep_nesting_is_refused_at_cel_gos_depth_and_shallower_nesting_still_reads() -> None:
    with pytest.raises(SelectorError, match=f"nested more than {MAX_NESTING} deep"):
        holds("(" * 5000 + f"{INDEX} == 1" + ")" * 5000)
    with pytest.raises(SelectorError, match="parse tree is .* levels deep, more than 150"):
        holds("(" * 30 + f"{INDEX} == 1" + ")" * 30)  # cel-python recurses per tree level: bounded sooner
    with pytest.raises(SelectorError, match="more than 150"):
        holds(f"{INDEX} == 1" + " && true" * 1000)
    assert holds("(" * 12 + f"{INDEX} == 1" + ")" * 12)


def test_an_expression_longer_than_the_api_allows_is_refused() -> None:
    with pytest.raises(SelectorError, match="more than 10240"):
        holds(f'{INDEX} == 1 && device.driver == "{"x" * MAX_EXPRESSION_LENGTH}"')


def test_brackets_inside_string_literals_are_not_nesting() -> None:
    assert not holds('device.driver == "' + "(" * 300 + '"')


_PIECES = st.sampled_from(
    [INDEX, "device.driver", 'device.attributes["a"]["b"]', "==", "!=", "&&", "||", "(", ")", "[", "]",
     '"', "'", "-", "9" * 30, "1", "true", " ", ".", "\\", "\u0663", "\x00", "quantity(", "semver(",
     ".all(x, ", ".exists(", "{", "}", ":", ",", "size(", "1.5", "1u", "b'x'", "?", "!"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_PIECES, max_size=60).map("".join)))
def test_compile_and_evaluate_never_raise_anything_but_selector_error(expression: str) -> None:
    try:
        result = holds(expression)
    except SelectorError:
        return
    assert isinstance(result, bool)
