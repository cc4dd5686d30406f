"""Consumable capacity: a device with `allowMultipleAllocations` shared by several allocations; pure.

Each allocation of such a device consumes, of every capacity the device publishes, what
its request asks (rounded up by the capacity's requestPolicy: to the next valid value,
or to `min` plus a whole number of `step`s) or, unasked, the policy's default or else
the whole capacity. A request above `validRange.max` or past every valid value does not
fit, nor one naming a capacity the device lacks. The device fits while what its
allocations in the cluster consume (their results' consumedCapacity) plus what the
search in progress consumes stays within each capacity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from fractions import Fraction

from engine.node.dra.model import CapacityRequestPolicy, CapacityRequirements, Device, DeviceCapacity
from engine.node.dra.requests import AllocationError
from schemas.quantity import QuantityError, parse_quantity

Amounts = dict[str, Fraction]  # fully qualified capacity name -> amount


def amount(text: str, where: str) -> Fraction:
    try:
        value = Fraction(parse_quantity(text))
    except QuantityError:
        raise AllocationError(f"{where}: {text!r} is not a quantity") from None
    if value < 0:
        raise AllocationError(f"{where}: capacity value is negative: {text!r}")
    return value


def qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def quantity_text(value: Fraction) -> str:
    """A Kubernetes quantity for an amount, in the largest suffix that keeps it whole (40Gi, 2k, 500m)."""
    if value.denominator != 1:
        return f"{int(value * 1000)}m"
    number = value.numerator
    for suffixes in (_BINARY, _DECIMAL):
        for suffix, size in suffixes:
            if number and number % size == 0:
                return f"{number // size}{suffix}"
    return str(number)


def _rounded(asked: Fraction, policy: CapacityRequestPolicy, where: str) -> Fraction | None:
    """What a request consumes under the policy; None when the policy does not allow it."""
    if policy.valid_range is not None and policy.valid_range.min is not None:
        low = amount(policy.valid_range.min, f"{where}.validRange.min")
        value = max(asked, low)
        if policy.valid_range.step is not None:
            step = amount(policy.valid_range.step, f"{where}.validRange.step")
            if step > 0:
                steps = -((low - value) // step)  # ceiling of (value - low) / step
                value = low + steps * step
        top = policy.valid_range.max
        return None if top is not None and value > amount(top, f"{where}.validRange.max") else value
    if policy.valid_values:
        values = sorted(amount(v, f"{where}.validValues") for v in policy.valid_values)
        return next((v for v in values if v >= asked), None)
    return asked


def consumed_by(device: Device, driver: str, requirements: CapacityRequirements | None) -> Amounts | None:
    """What one allocation of the device consumes, by capacity; None when the request does not fit it."""
    capacities: dict[str, DeviceCapacity] = {qualified(n, driver): c for n, c in device.capacity.items()}
    asked = {qualified(n, driver): v for n, v in (requirements.requests if requirements else {}).items()}
    if any(name not in capacities for name in asked):
        return None  # a capacity this device does not have
    out: Amounts = {}
    for name, capacity in capacities.items():
        where = f"device {device.name}, capacity {name}"
        policy = capacity.request_policy
        if name not in asked:
            fill = policy.default if policy is not None and policy.default is not None else capacity.value
            out[name] = amount(fill, where)
            continue
        request = amount(asked[name], f"request for capacity {name}")
        value = request if policy is None else _rounded(request, policy, f"{where}.requestPolicy")
        if value is None:
            return None
        out[name] = value
    return out


def fits(device: Device, driver: str, consumed: Amounts, already: Mapping[str, Fraction]) -> bool:
    """Whether the capacities hold `consumed` on top of `already` (what other allocations consume)."""
    for name, capacity in device.capacity.items():
        key = qualified(name, driver)
        total = amount(capacity.value, f"device {device.name}, capacity {key}")
        if already.get(key, Fraction(0)) + consumed.get(key, Fraction(0)) > total:
            return False
    return True


class ShareLedger:
    """What shared devices' allocations consume: those in the cluster, and this search's (mutable)."""

    def __init__(self, cluster: Mapping[tuple[str, str, str], Mapping[str, Fraction]]) -> None:
        self._cluster = cluster
        self._search: dict[tuple[str, str, str], Amounts] = {}

    def check(
        self,
        device_id: tuple[str, str, str],
        device: Device,
        requirements: CapacityRequirements | None,
        *,
        shared: bool,
    ) -> Amounts | bool:
        """What one share consumes (False: it does not fit); True: nothing to account (an exclusive device
        whose capacities hold the request, or one asked no capacity)."""
        asks = requirements is not None and bool(requirements.requests)
        if not shared and not asks:
            return True
        driver = device_id[0]
        consumed = consumed_by(device, driver, requirements)
        if consumed is None:
            return False
        already: dict[str, Fraction] = dict(self._cluster.get(device_id, {})) if shared else {}
        for name, value in self._search.get(device_id, {}).items():
            already[name] = already.get(name, Fraction(0)) + value
        if not fits(device, driver, consumed, already):
            return False
        return consumed if shared else True

    def add(self, device_id: tuple[str, str, str], consumed: Amounts, sign: int = 1) -> None:
        held = self._search.setdefault(device_id, {})
        for name, value in consumed.items():
            held[name] = held.get(name, Fraction(0)) + sign * value


def share_id(claim_uid: str, request: str, device_id: tuple[str, str, str], ordinal: int) -> str:
    """A stable share id for one allocation of a shared device (the same claim, request and device, the same id)."""
    text = "/".join((claim_uid, request, *device_id, str(ordinal)))
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
