"""A DRA selector is a tenant's text: the pod of a selector that cannot be read is reported unschedulable
with the request's field, never left undecided (the selector's own bounds: tests/dra/test_dra_cel_bounds.py).

An integer literal of more than 4,300 digits raised Python's ValueError out of the placer
(no decision, no Event), and deeply nested parentheses were unwrapped in quadratic time.
"""

from __future__ import annotations

import msgspec
import pytest
from placer_builders import pending, status, topology

from engine import Engine
from schemas.dra import ClaimRequest, ClaimSelector, DraDevice, PodClaim
from schemas.events import PlacementOutcome, ResourceSliceEvent
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


@pytest.mark.parametrize(
    ("cel", "said"),
    [
        (f"{INDEX} == {'9' * 5000}", "Exceeds the limit"),
        ("(" * 5000 + f"{INDEX} == 1" + ")" * 5000, "nested more than 250 deep"),
        (f'{INDEX} == 1 && device.driver == "{"x" * 10240}"', "more than 10240"),
        (f"{INDEX} == 1" + " && true" * 1000, "levels deep"),
    ],
)
@pytest.mark.timeout(20)
def test_the_pod_of_an_unreadable_selector_is_reported_unschedulable_with_the_field(cel: str, said: str) -> None:
    result = decide(_view(), _claimed_pod(cel), engine=Engine())  # type: ignore[arg-type]
    placement = result.placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "claims[0].requests[0].selectors" in placement.reason
    assert said in placement.reason
    assert len(placement.reason) < 600  # the expression is quoted cut, not whole


def test_a_readable_selector_still_places_the_pod() -> None:
    result = decide(_view(), _claimed_pod(f"({INDEX} == 1)"), engine=Engine())  # type: ignore[arg-type]
    placement = result.placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED
    assert [r.device for r in placement.claims[0].results] == ["gpu-1"]
