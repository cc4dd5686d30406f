"""Claim constraints (matchAttribute, distinctAttribute), device taints and tolerations; pure.

A constraint sees each device as it is about to be allocated (`add`) and when the search
takes it back (`remove`), as the structured allocator's constraints do. A constraint
with `requests` applies to those requests only (a subrequest is named `<request>/<sub>`
or by its parent's name); without, to every request of the claim. A device without the
attribute never satisfies either constraint.
"""

from __future__ import annotations

from collections import Counter

from engine.node.dra.model import Device, DeviceAttribute, DeviceConstraint, DeviceTaint, DeviceToleration

AttributeKey = tuple[str, object]  # (type, value): an int never equals a string or a version


def lookup_attribute(device: Device, driver: str, name: str) -> AttributeKey | None:
    """The device's value of a fully qualified attribute (the driver's own domain also unqualified)."""
    found = device.attributes.get(name)
    if found is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != driver:
            return None
        found = device.attributes.get(ident)
        if found is None:
            return None
    return _key(found)


def _key(attribute: DeviceAttribute) -> AttributeKey | None:
    if attribute.string is not None:
        return ("string", attribute.string)
    if attribute.int_value is not None:
        return ("int", attribute.int_value)
    if attribute.bool_value is not None:
        return ("bool", attribute.bool_value)
    if attribute.version is not None:
        return ("version", attribute.version)  # semver's minimal form: equal strings, equal versions
    return None


class Constraint:
    """One of a claim's constraints while a search runs (mutable)."""

    def __init__(self, spec: DeviceConstraint) -> None:
        self.requests = frozenset(spec.requests)
        self.attribute = spec.match_attribute or spec.distinct_attribute or ""
        self.distinct = spec.distinct_attribute is not None
        self._values: Counter[AttributeKey] = Counter()

    def applies(self, request: str, sub_request: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(sub_request) and f"{request}/{sub_request}" in self.requests)

    def admits(self, request: str, sub_request: str, device: Device, driver: str) -> bool:
        """Whether `add` would take the device now (nothing changes)."""
        if not self.applies(request, sub_request):
            return True
        value = lookup_attribute(device, driver, self.attribute)
        if value is None:
            return False
        if self.distinct:
            return not self._values[value]
        return not self._values or value in self._values

    def admits_value(self, value: AttributeKey | None) -> bool:
        """`admits` for a request the constraint applies to, given the device's value of the attribute."""
        if value is None:
            return False
        if self.distinct:
            return not self._values[value]
        return not self._values or value in self._values

    def add(self, request: str, sub_request: str, device: Device, driver: str) -> bool:
        if not self.applies(request, sub_request):
            return True
        value = lookup_attribute(device, driver, self.attribute)
        if value is None:
            return False
        if self.distinct:
            if self._values[value]:
                return False
        elif self._values and value not in self._values:
            return False
        self._values[value] += 1
        return True

    def remove(self, request: str, sub_request: str, device: Device, driver: str) -> None:
        if not self.applies(request, sub_request):
            return
        value = lookup_attribute(device, driver, self.attribute)
        if value is not None:
            self._values[value] -= 1
            if not self._values[value]:
                del self._values[value]


PREVENTING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})  # others (None, unknown) do not prevent allocation


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """core/v1's toleration rule as resource.k8s.io applies it to device taints."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.operator in ("", "Equal") and toleration.value == taint.value


def taint_prevents(device: Device, tolerations: tuple[DeviceToleration, ...]) -> bool:
    return any(
        taint.effect in PREVENTING_EFFECTS and not any(tolerates(t, taint) for t in tolerations)
        for taint in device.taints
    )
