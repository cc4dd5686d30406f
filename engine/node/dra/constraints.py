"""Claim constraints (matchAttribute, distinctAttribute), device taints and tolerations; pure.

A constraint sees each device as it is about to be allocated (`add`) and when the search
takes it back (`remove`), as the structured allocator's constraints do. A constraint
with `requests` applies to those requests only (a subrequest is named `<request>/<sub>`
or by its parent's name); without, to every request of the claim. A device without the
attribute never satisfies either constraint.

An attribute's value is a set (KEP-5491, list-type attributes): a list attribute is the set
of its elements, a scalar the set of itself. `matchAttribute` holds while the sets of the
devices taken have a non-empty intersection (scalars: all equal); `distinctAttribute` while
they are pairwise disjoint (scalars: all different). Both stay monotonic: a device refused
now is refused after more are taken. Without the DRAListTypeAttributes gate a list
attribute is not read (as an API server without the gate drops it), so it is absent.
"""

from __future__ import annotations

from collections import Counter

from engine.node.dra.model import Device, DeviceAttribute, DeviceConstraint, DeviceTaint, DeviceToleration

AttributeKey = tuple[str, object]  # (type, value): an int never equals a string or a version
AttributeValues = frozenset[AttributeKey]  # an attribute's value as a set: a scalar is a set of one


def lookup_attribute(device: Device, driver: str, name: str, lists: bool = True) -> AttributeValues | None:
    """The device's value of a fully qualified attribute (the driver's own domain also unqualified)."""
    found = device.attributes.get(name)
    if found is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != driver:
            return None
        found = device.attributes.get(ident)
        if found is None:
            return None
    return attribute_values(found, lists)


def attribute_values(attribute: DeviceAttribute, lists: bool = True) -> AttributeValues | None:
    """The attribute's value as a set of typed keys; None for no value (an empty list included)."""
    if attribute.string is not None:
        return frozenset({("string", attribute.string)})
    if attribute.int_value is not None:
        return frozenset({("int", attribute.int_value)})
    if attribute.bool_value is not None:
        return frozenset({("bool", attribute.bool_value)})
    if attribute.version is not None:
        return frozenset({("version", attribute.version)})  # semver's minimal form: equal strings, equal versions
    if not lists:
        return None
    for kind, values in (
        ("string", attribute.strings),
        ("int", attribute.ints),
        ("bool", attribute.bools),
        ("version", attribute.versions),
    ):
        if values:
            return frozenset((kind, v) for v in values)
    return None


class Constraint:
    """One of a claim's constraints while a search runs (mutable)."""

    def __init__(self, spec: DeviceConstraint, lists: bool = True) -> None:
        self.requests = frozenset(spec.requests)
        self.attribute = spec.match_attribute or spec.distinct_attribute or ""
        self.distinct = spec.distinct_attribute is not None
        self.lists = lists
        self._sets: Counter[AttributeValues] = Counter()  # matchAttribute: the taken devices' sets
        self._common: AttributeValues | None = None  # their intersection, kept until a device comes or goes
        self._elements: Counter[AttributeKey] = Counter()  # distinctAttribute: the elements taken

    def applies(self, request: str, sub_request: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(sub_request) and f"{request}/{sub_request}" in self.requests)

    def value_of(self, device: Device, driver: str) -> AttributeValues | None:
        return lookup_attribute(device, driver, self.attribute, self.lists)

    def admits(self, request: str, sub_request: str, device: Device, driver: str) -> bool:
        """Whether `add` would take the device now (nothing changes)."""
        if not self.applies(request, sub_request):
            return True
        return self.admits_value(self.value_of(device, driver))

    def admits_value(self, value: AttributeValues | None) -> bool:
        """`admits` for a request the constraint applies to, given the device's value of the attribute."""
        if value is None:
            return False
        if self.distinct:
            return not any(self._elements[v] for v in value)
        if not self._sets:
            return True
        if self._common is None:
            self._common = frozenset.intersection(*self._sets)
        return not self._common.isdisjoint(value)

    def add(self, request: str, sub_request: str, device: Device, driver: str) -> bool:
        if not self.applies(request, sub_request):
            return True
        value = self.value_of(device, driver)
        if value is None or not self.admits_value(value):
            return False
        if self.distinct:
            self._elements.update(value)
        else:
            self._sets[value] += 1
            self._common = None
        return True

    def remove(self, request: str, sub_request: str, device: Device, driver: str) -> None:
        if not self.applies(request, sub_request):
            return
        value = self.value_of(device, driver)
        if value is None:
            return
        if self.distinct:
            self._elements.subtract(value)
            self._elements = +self._elements
        else:
            self._sets[value] -= 1
            if not self._sets[value]:
                del self._sets[value]
            self._common = None


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
