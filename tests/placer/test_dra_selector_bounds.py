"""A DRA selector is a tenant's text: reading it is bounded and every refusal is a SelectorError.

An integer literal of more than 4,300 digits raised Python's ValueError out of the placer
(no decision, no Event), and deeply nested parentheses were unwrapped in quadratic time.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from placer_builders import pending, status, topology

from engine import Engine
from schemas.dra import ClaimRequest, ClaimSelector, DraDevice, PodClaim
from schemas.events import PlacementOutcome, ResourceSliceEvent
from services.placer import dra_selectors
from services.placer.decide import decide
from services.placer.view import ClusterView

DRIVER = "gpu.nvidia.com"
INDEX = f'device.attributes["{DRIVER}"].index'


def _claimed_pod(cel: str) -> msgspec.Struct:
    request = ClaimRequest(name="gpus", device_class=DRIVER, count=1, selectors=(ClaimSelector(cel=cel),))
    claim = PodClaim(pod_claim_name="gpu", claim_name="pod-gpu", claim_uid="claim-uid", requests=(request,))
    return msgspec.structs.replace(pending("p1", 0), requests={"cpu": "1"}, claims=(claim,))


def _view() -> ClusterView:
    view = ClusterView()
    view.apply(topology("n1", 2))
    view.apply(status("n1", allocatable={"cpu": "8", "memory": "64Gi", "pods": "110"}))
    devices = tuple(
        DraDevice(name=f"gpu-{i}", uuid=f"GPU-n1-{i}", attributes={f"{DRIVER}/type": "gpu", f"{DRIVER}/index": i})
        for i in range(2)
    )
    view.apply(ResourceSliceEvent(name="n1-slice", node="n1", driver=DRIVER, pool="n1", devices=devices))
    return view


def test_an_integer_literal_past_int64_is_a_selector_error_not_a_crash() -> None:
    with pytest.raises(dra_selectors.SelectorError, match="int64"):
        dra_selectors.parse(f"{INDEX} == {'9' * 5000}")
    with pytest.raises(dra_selectors.SelectorError, match="int64"):
        dra_selectors.parse(f"{INDEX} == {2**63}")
    assert dra_selectors.parse(f"{INDEX} == {2**63 - 1}")[0].value == 2**63 - 1
    assert dra_selectors.parse(f"{INDEX} == -{2**63}")[0].value == -(2**63)
    assert dra_selectors.parse(f"{INDEX} == 0007")[0].value == 7


def test_the_pod_of_an_unreadable_selector_is_reported_unschedulable_with_the_field() -> None:
    result = decide(_view(), _claimed_pod(f"{INDEX} == {'9' * 5000}"), engine=Engine())  # type: ignore[arg-type]
    placement = result.placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "claims[0].requests[0].selectors" in placement.reason
    assert "int64" in placement.reason
    assert len(placement.reason) < 400  # the expression is quoted cut, not whole


@pytest.mark.timeout(20)
def test_deep_nesting_is_refused_at_cel_gos_depth_and_shallower_nesting_still_reads() -> None:
    deep = "(" * 5000 + f"{INDEX} == 1" + ")" * 5000
    with pytest.raises(dra_selectors.SelectorError, match="nested 5001 deep"):
        dra_selectors.parse(deep)
    depth = dra_selectors.MAX_NESTING - 1  # the attribute's own [ ] is one more level
    (term,) = dra_selectors.parse("(" * depth + f"{INDEX} == 1" + ")" * depth)
    assert term.value == 1


def test_an_expression_longer_than_the_api_allows_is_refused() -> None:
    padded = f'{INDEX} == 1 && device.driver == "{"x" * dra_selectors.MAX_EXPRESSION_LENGTH}"'
    with pytest.raises(dra_selectors.SelectorError, match="more than 10240"):
        dra_selectors.parse(padded)


def test_brackets_inside_string_literals_are_not_nesting() -> None:
    (term,) = dra_selectors.parse('device.driver == "' + "(" * 300 + '"')
    assert term.value == "(" * 300


_PIECES = st.sampled_from(
    [INDEX, "device.driver", 'device.attributes["a"]["b"]', "==", "!=", "&&", "||", "(", ")", "[", "]",
     '"', "'", "-", "9" * 30, "1", "true", " ", ".", "\\", "\u0663", "\x00"]
)  # fmt: skip


_LITERALS = st.one_of(
    st.integers().map(str),
    st.builds(lambda head, n: str(head) + "0" * n, st.integers(1, 9), st.integers(4300, 4400)),  # past int()'s limit
    st.text(max_size=20).map(lambda text: f'"{text}"'),
    st.sampled_from(["true", "false", "'x'"]),
)
_TERMS = st.builds(
    lambda field, op, literal, depth: "(" * depth + f"{field} {op} {literal}" + ")" * depth,
    st.sampled_from([INDEX, "device.driver", 'device.attributes["a"]["b"]']),
    st.sampled_from(["==", "!="]),
    _LITERALS,
    st.integers(min_value=0, max_value=300),
)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.lists(_PIECES, max_size=60).map("".join),
        st.lists(_TERMS, min_size=1, max_size=4).map(" && ".join),
    )
)
def test_parse_never_raises_anything_but_selector_error(expression: str) -> None:
    try:
        terms = dra_selectors.parse(expression)
    except dra_selectors.SelectorError as exc:
        assert str(exc).startswith("selector ")
        return
    for term in terms:
        assert isinstance(term.value, str | bool) or -(2**63) <= term.value < 2**63
