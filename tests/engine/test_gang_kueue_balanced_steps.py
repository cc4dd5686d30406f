"""Kueue's unit cases of its balanced placement steps (pkg/cache/scheduler/tas_balanced_placement_test.go)
on engine.decide.gang.balance's own steps; the leader cases are left out (a Kueue pod group has none)."""

from __future__ import annotations

import pytest

from engine.decide.gang.balance import _balanced, _Domain, _fewest


def domain(name: str, pods: int, key: tuple[str, ...] = ()) -> _Domain:
    out = _Domain(name, key or (name,), node=True, at_slice=True, above_slice=False)
    out.pods = out.slices = pods
    return out


def fewest_of(*sizes: tuple[str, int]) -> list[_Domain]:
    return [domain(name, pods) for name, pods in sizes]


OPTIMAL = {  # TestSelectOptimalDomainSetToFit (d1: 9, d2: 6, d3: 4, d4: 2), leaderless cases
    "no fit": (22, []),
    "best fit, single domain": (5, ["d2"]),
}


@pytest.mark.parametrize("case", OPTIMAL, ids=list(OPTIMAL))
def test_select_optimal_domain_set_to_fit(case: str) -> None:
    count, want = OPTIMAL[case]
    domains = fewest_of(("d1", 9), ("d2", 6), ("d3", 4), ("d4", 2))
    got = _fewest(domains, count, 1, by_entropy=True)
    assert sorted(d.name for d in got or []) == want


@pytest.mark.parametrize("by_entropy", [False, True], ids=["balanced selection", "entropy-prioritized selection"])
def test_select_optimal_domain_set_to_fit_stable_tie_break(by_entropy: bool) -> None:
    domains = [
        domain("leaf-a", 3, ("block-b", "host-a")),
        domain("leaf-m", 3, ("block-b", "host-m")),
        domain("leaf-z", 3, ("block-a", "host-z")),
        domain("leaf-zz", 3, ("block-a", "host-zz")),
    ]
    got = _fewest(domains, 1, 1, by_entropy=by_entropy)
    assert [d.name for d in got or []] == ["leaf-z"]


BALANCED = {  # TestPlaceSlicesOnDomainsBalanced: (domains, slices, threshold, each chosen domain's slices)
    "simple balanced placement on two domains": (3, 20, 10, {"d1": 10, "d2": 10}),
    "simple placement on three domains": (3, 40, 13, {"d1": 14, "d2": 13, "d3": 13}),
    "find smallest domain that fits": (5, 2, 2, {"d5": 2}),
    "correctly select domains": (5, 25, 10, {"d1": 15, "d4": 10}),
}


@pytest.mark.parametrize("case", BALANCED, ids=list(BALANCED))
def test_place_slices_on_domains_balanced(case: str) -> None:
    first, slices, threshold, want = BALANCED[case]
    domains = fewest_of(("d1", 18), ("d2", 18), ("d3", 18), ("d4", 10), ("d5", 2))[:first]
    got = _balanced(domains, slices, 1, threshold)
    assert got is not None
    assert {d.name: d.slices for d in got} == want
    assert all(d.pods == d.slices for d in got)


def test_place_slices_on_domains_balanced_stable_tie_break() -> None:
    domains = [domain("leaf-a", 3, ("block-b", "host-a")), domain("leaf-z", 3, ("block-a", "host-z"))]
    got = _balanced(domains, 1, 1, 1)
    assert [d.name for d in got or []] == ["leaf-z"]
