"""DeviceTaintRules: an administrator's taints on published devices, then tolerated or not as slice taints."""

from __future__ import annotations

from typing import Any

import msgspec
from dra_builders import DRIVER, claim, device, exact, picked, run, slice_

from engine.node.dra.model import DeviceTaintRule
from engine.node.dra.taint_rules import with_taint_rules


def rule(selector: dict[str, str] | None, effect: str = "NoSchedule") -> DeviceTaintRule:
    spec: dict[str, Any] = {"taint": {"key": "maintenance", "value": "rack-7", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return msgspec.convert({"metadata": {"name": "drain"}, "spec": spec}, DeviceTaintRule)


def tainted(rules: list[DeviceTaintRule]) -> list[str]:
    slices = with_taint_rules([slice_([device("d0"), device("d1")]), slice_([device("d0")], pool="other")], rules)
    return [f"{s.spec.pool.name}/{d.name}" for s in slices for d in s.spec.devices if d.taints]


def test_a_rule_selects_by_driver_pool_and_device() -> None:
    assert tainted([rule({"device": "d0"})]) == ["pool-1/d0", "other/d0"]
    assert tainted([rule({"pool": "pool-1", "device": "d0"})]) == ["pool-1/d0"]
    assert tainted([rule({"driver": DRIVER})]) == ["pool-1/d0", "pool-1/d1", "other/d0"]
    assert tainted([rule({"driver": "nic.example.com"})]) == []


def test_the_empty_selector_matches_every_device_and_none_matches_none() -> None:
    assert tainted([rule({})]) == ["pool-1/d0", "pool-1/d1", "other/d0"]
    assert tainted([rule(None)]) == []


def test_a_device_a_rule_taints_is_allocated_only_with_a_toleration() -> None:
    slices = list(with_taint_rules([slice_([device("d0"), device("d1")])], [rule({"device": "d0"})]))
    assert picked(run([claim([exact("req", 2)])], slices)) is None
    tolerated = exact("req", 2, tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}])
    assert picked(run([claim([tolerated])], slices)) == [[("req", "d0"), ("req", "d1")]]
