"""Partitionable devices: counter sets a pool shares, consumed by the devices allocated from it; pure.

A pool's available counters are its counter sets less what every already allocated
device of the pool consumes (on any node); the devices of the search in progress consume
on top. A device fits while no counter of its pool would go below zero.
"""

from __future__ import annotations

from collections.abc import Set
from fractions import Fraction

from engine.node.dra.model import Device
from engine.node.dra.pools import Pool
from engine.node.dra.requests import AllocationError
from schemas.quantity import QuantityError, parse_quantity

Counters = dict[str, dict[str, Fraction]]  # counter set -> counter -> amount


def _amount(pool: Pool, where: str, text: str) -> Fraction:
    try:
        return Fraction(parse_quantity(text))
    except QuantityError:
        raise AllocationError(f"resource pool {pool.text}: {where}: {text!r} is not a quantity") from None


class CounterLedger:
    """Counters available and consumed per pool while one allocation runs (mutable)."""

    def __init__(self, allocated: Set[tuple[str, str, str]]) -> None:
        self._allocated = allocated
        self._available: dict[tuple[str, str], Counters] = {}
        self._consumed: dict[tuple[str, str], Counters] = {}

    def _available_of(self, pool: Pool) -> Counters:
        key = (pool.driver, pool.name)
        found = self._available.get(key)
        if found is not None:
            return found
        available: Counters = {}
        for counter_set in pool.counter_sets:
            named = available.setdefault(counter_set.name, {})
            for name, counter in counter_set.counters.items():
                named[name] = _amount(pool, f"counter set {counter_set.name}, counter {name}", counter.value)
        for device_name, consumption in pool.consumers:
            if (pool.driver, pool.name, device_name) not in self._allocated:
                continue
            for use in consumption:
                counters = available.get(use.counter_set, {})
                for name, counter in use.counters.items():
                    if name in counters:  # the API validates that it is
                        counters[name] -= _amount(pool, f"device {device_name}", counter.value)
        self._available[key] = available
        return available

    def take(self, pool: Pool, device: Device) -> bool:
        """Consume the device's counters; False (and nothing consumed) when some counter would run out."""
        available = self._available_of(pool)
        consumed = self._consumed.setdefault((pool.driver, pool.name), {})
        self._apply(pool, device, consumed, +1)
        for set_name, counters in available.items():
            used = consumed.get(set_name, {})
            if any(amount < used.get(name, 0) for name, amount in counters.items()):
                self._apply(pool, device, consumed, -1)
                return False
        return True

    def give_back(self, pool: Pool, device: Device) -> None:
        self._apply(pool, device, self._consumed[(pool.driver, pool.name)], -1)

    def _apply(self, pool: Pool, device: Device, consumed: Counters, sign: int) -> None:
        for use in device.consumes_counters:
            counters = consumed.setdefault(use.counter_set, {})
            for name, counter in use.counters.items():
                amount = _amount(pool, f"device {device.name}", counter.value)
                counters[name] = counters.get(name, Fraction(0)) + sign * amount
