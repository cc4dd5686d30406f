"""Toleration matching, from kube-scheduler's TaintToleration test table (taint_toleration_test.go)."""

from __future__ import annotations

import pytest

from engine.decide.kube.taints import (
    count_intolerable_prefer_no_schedule,
    first_untolerated,
    tolerates,
)
from schemas.kube import Taint, Toleration

NS, PNS, NE = "NoSchedule", "PreferNoSchedule", "NoExecute"


def taint(key: str, value: str = "", effect: str = NS) -> Taint:
    return Taint(key=key, value=value, effect=effect)


def tol(key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> Toleration:
    return Toleration(key=key, operator=operator, value=value, effect=effect)


@pytest.mark.parametrize(
    ("taints", "tolerations", "untolerated"),
    [
        # a pod with no tolerations cannot land on a node with a taint
        ([taint("dedicated", "user1")], [], taint("dedicated", "user1")),
        # a toleration naming key, value and effect
        ([taint("dedicated", "user1")], [tol("dedicated", "Equal", "user1", NS)], None),
        # a different value does not tolerate
        ([taint("dedicated", "user1")], [tol("dedicated", "Equal", "user2", NS)], taint("dedicated", "user1")),
        # Exists ignores the value
        ([taint("foo", "bar")], [tol("foo", "Exists", effect=NS)], None),
        # several tolerations, several taints, all tolerated
        (
            [taint("dedicated", "user2"), taint("foo")],
            [tol("dedicated", "Equal", "user2", NS), tol("foo", "Exists", effect=NS)],
            None,
        ),
        # key and value match, but a non-empty effect that differs does not tolerate
        ([taint("foo", "bar")], [tol("foo", "Equal", "bar", PNS)], taint("foo", "bar")),
        # an empty effect tolerates every effect
        ([taint("foo", "bar")], [tol("foo", "Equal", "bar")], None),
        # PreferNoSchedule taints never filter
        ([taint("dedicated", "user1", PNS)], [tol("dedicated", "Equal", "user2", NS)], None),
        ([taint("dedicated", "user1", PNS)], [], None),
        # NoExecute filters too
        ([taint("gone", effect=NE)], [], taint("gone", effect=NE)),
        # an empty key with Exists tolerates every taint
        ([taint("a", "1"), taint("b", "2", NE)], [tol(operator="Exists")], None),
        # ... but only the effect it names
        ([taint("a", "1"), taint("b", "2", NE)], [tol(operator="Exists", effect=NS)], taint("b", "2", NE)),
        # an empty operator means Equal
        ([taint("a", "1")], [tol("a", "", "1")], None),
        ([taint("a", "1")], [tol("a", "", "2")], taint("a", "1")),
        # the first untolerated taint in the node's order is the one reported
        ([taint("x"), taint("y")], [], taint("x")),
        ([taint("x"), taint("y")], [tol("x", "Exists")], taint("y")),
    ],
)
def test_first_untolerated(taints: list[Taint], tolerations: list[Toleration], untolerated: Taint | None) -> None:
    assert first_untolerated(taints, tolerations) == untolerated


def test_the_effects_filtered_can_be_chosen() -> None:
    taints = [taint("soft", effect=PNS)]
    assert first_untolerated(taints, [], effects={PNS}) == taints[0]
    assert first_untolerated(taints, []) is None


def test_tolerates_matches_key_only_when_given() -> None:
    assert tolerates(tol("a", "Exists"), taint("a", "anything", NE))
    assert not tolerates(tol("b", "Exists"), taint("a", "anything"))
    assert tolerates(tol(operator="Exists"), taint("zzz", "v", PNS))


@pytest.mark.parametrize(
    ("taints", "tolerations", "count"),
    [
        # kube's TaintToleration score table: the fewer intolerable PreferNoSchedule taints the better
        ([taint("foo", "bar", PNS)], [tol("foo", "Equal", "bar", PNS)], 0),
        ([taint("foo", "bar", PNS)], [], 1),
        (
            [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)],
            [tol("cpu-type", "Equal", "arm64", PNS), tol("disk-type", "Equal", "ssd", PNS)],
            0,
        ),
        (
            [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)],
            [tol("cpu-type", "Equal", "arm64", PNS)],
            1,
        ),
        # NoSchedule taints are not counted; a NoSchedule toleration does not help
        ([taint("cpu-type", "arm64", NS), taint("disk-type", "ssd", PNS)], [], 1),
        ([taint("disk-type", "ssd", PNS)], [tol("disk-type", "Equal", "ssd", NS)], 1),
        # an empty effect tolerates PreferNoSchedule
        ([taint("disk-type", "ssd", PNS)], [tol("disk-type", "Exists")], 0),
    ],
)
def test_count_intolerable_prefer_no_schedule(taints: list[Taint], tolerations: list[Toleration], count: int) -> None:
    assert count_intolerable_prefer_no_schedule(taints, tolerations) == count
