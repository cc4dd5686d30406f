"""Pure outcome rules: status classes, what a re-read pod means, placement checks."""

from __future__ import annotations

import pytest

from schemas.events import (
    BindingOutcome,
    DeviceAssignment,
    PlacementEvent,
    PlacementOutcome,
)
from services.binder.outcome import (
    ApiErrorKind,
    PodStanding,
    PodView,
    classify_status,
    describe_devices,
    judge_pod,
    outcome_of,
    placement_problem,
)

DEVICES = (DeviceAssignment(index=0), DeviceAssignment(index=3))


def placement(**changes: object) -> PlacementEvent:
    fields: dict[str, object] = {
        "decision_id": "d1",
        "uid": "u1",
        "namespace": "ns",
        "name": "pod",
        "pod_resource_version": "5",
        "outcome": PlacementOutcome.PLACED,
        "node": "n1",
        "devices": DEVICES,
    }
    fields.update(changes)
    return PlacementEvent(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, ApiErrorKind.TRANSIENT),
        (500, ApiErrorKind.TRANSIENT),
        (503, ApiErrorKind.TRANSIENT),
        (504, ApiErrorKind.TRANSIENT),
        (409, ApiErrorKind.CONFLICT),
        (404, ApiErrorKind.NOT_FOUND),
        (400, ApiErrorKind.REJECTED),
        (403, ApiErrorKind.REJECTED),
        (422, ApiErrorKind.REJECTED),
    ],
)
def test_status_classes(status: int, kind: ApiErrorKind) -> None:
    assert classify_status(status) is kind


def test_missing_pod_fails_as_deleted() -> None:
    judgement = judge_pod(None, placement())
    assert judgement.standing is PodStanding.MISSING
    assert outcome_of(judgement.standing) is BindingOutcome.FAILED
    assert "deleted" in judgement.reason


def test_pod_recreated_under_the_same_name_fails() -> None:
    judgement = judge_pod(PodView(uid="other"), placement())
    assert judgement.standing is PodStanding.REPLACED
    assert outcome_of(judgement.standing) is BindingOutcome.FAILED


def test_unbound_pod_goes_ahead_even_with_a_newer_resource_version() -> None:
    judgement = judge_pod(PodView(uid="u1", resource_version="99"), placement())
    assert judgement.standing is PodStanding.UNBOUND
    assert outcome_of(judgement.standing) is None


def test_bound_to_the_same_node_is_success() -> None:
    pod = PodView(uid="u1", node_name="n1", devices=DEVICES)
    judgement = judge_pod(pod, placement())
    assert outcome_of(judgement.standing) is BindingOutcome.BOUND


def test_bound_to_the_same_node_without_our_annotation_is_success() -> None:
    assert outcome_of(judge_pod(PodView(uid="u1", node_name="n1"), placement()).standing) is BindingOutcome.BOUND


def test_bound_to_the_same_node_with_other_devices_is_a_conflict() -> None:
    other = (DeviceAssignment(index=5),)
    pod = PodView(uid="u1", node_name="n1", devices=other)
    judgement = judge_pod(pod, placement())
    assert outcome_of(judgement.standing) is BindingOutcome.CONFLICT
    assert "5" in judgement.reason


def test_bound_to_another_node_is_a_conflict() -> None:
    judgement = judge_pod(PodView(uid="u1", node_name="n2"), placement())
    assert outcome_of(judgement.standing) is BindingOutcome.CONFLICT
    assert "n2" in judgement.reason


def test_terminating_unbound_pod_fails() -> None:
    judgement = judge_pod(PodView(uid="u1", terminating=True), placement())
    assert outcome_of(judgement.standing) is BindingOutcome.FAILED


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"node": ""}, "node"),
        ({"uid": ""}, "uid"),
        ({"name": ""}, "namespace/name"),
        ({"devices": (DeviceAssignment(index=-1),)}, "devices[0].index"),
        (
            {"devices": (DeviceAssignment(index=1), DeviceAssignment(index=0, memory_mib=-5))},
            "devices[1].memory_mib",
        ),
        ({"devices": (DeviceAssignment(index=0, cores=101),)}, "devices[0].cores"),
        ({"devices": (DeviceAssignment(index=0, cores=-1),)}, "devices[0].cores"),
    ],
)
def test_placement_problems_name_the_field(changes: dict[str, object], field: str) -> None:
    problem = placement_problem(placement(**changes))
    assert problem is not None and problem.startswith(field)


def test_memory_only_share_is_a_valid_placement() -> None:
    # nvidia.com/gpumem without gpucores (or gpucores: 0): memory only, no compute share, as in HAMi
    assert placement_problem(placement(devices=(DeviceAssignment(index=0, memory_mib=4000, cores=0),))) is None


def test_unschedulable_placement_needs_no_node() -> None:
    assert placement_problem(placement(outcome=PlacementOutcome.UNSCHEDULABLE, node="", devices=())) is None


def test_describe_devices() -> None:
    assert describe_devices(DEVICES) == "0,3"
    assert describe_devices((DeviceAssignment(index=2, memory_mib=8000, cores=50),)) == "2 (8000 MiB, 50 cores)"
    assert describe_devices(()) == "none"
