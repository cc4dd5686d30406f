"""Kubernetes' CEL libraries that DRA selectors may call, on top of cel-python's standard functions; pure.

    quantity("1Gi"), isQuantity(s), q.compareTo(o), q.isGreaterThan(o), q.isLessThan(o),
    q.add(o), q.sub(o), q.sign(), q.isInteger(), q.asInteger(), q.asApproximateFloat()
    semver("1.2.3"), isSemver(s), v.major(), v.minor(), v.patch(), v.compareTo(o), ...
    x.includes(v): v in the list x, or the scalar x == v (DRAListTypeAttributes)
    strings (cel-go's ext.Strings): lowerAscii, upperAscii, trim, split, join, replace,
    substring, charAt, indexOf, lastIndexOf; regex: find, findAll; lists: sum, min, max, isSorted

Equality is CEL's heterogeneous equality as cel-go (and so Kubernetes) has it: values of
different kinds are unequal (`1 == true` is false, not an error), numbers compare by value
across int, uint and double.

`compareTo`, `isGreaterThan`, `isLessThan` and `indexOf` are shared by several types and
dispatch on their receiver, as CEL's overloads do. A wrong argument type is an error
value, never a Python exception leaking out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import re2
import semver
from celpy import celtypes
from celpy.evaluation import CELEvalError, bool_eq

from schemas.quantity import QuantityError, parse_quantity

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class CelLibraryError(ValueError):
    """An argument a library function cannot take (CEL: an error value)."""


class Quantity:
    """A Kubernetes quantity as CEL sees it: exact, compared only through its methods (and ==)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.value})"


class Semver:
    """A semantic version (semver 2.0, strict) as CEL sees it."""

    __slots__ = ("version",)

    def __init__(self, version: semver.Version) -> None:
        self.version = version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.version.compare(other.version) == 0

    def __hash__(self) -> int:
        return hash(str(self.version))

    def __repr__(self) -> str:
        return f"Semver({self.version})"


def make_quantity(text: str) -> Quantity:
    try:
        return Quantity(Fraction(parse_quantity(str(text))))
    except QuantityError:
        raise CelLibraryError(
            f"quantities must match the regular expression for Kubernetes quantities: {str(text)!r}"
        ) from None


def make_semver(text: str) -> Semver:
    try:
        return Semver(semver.Version.parse(str(text)))
    except (ValueError, TypeError):
        raise CelLibraryError(f"could not parse {str(text)!r} as semver") from None


def _is(parse: Callable[[str], object]) -> Callable[[str], celtypes.BoolType]:
    def check(text: str) -> celtypes.BoolType:
        try:
            parse(text)
        except CelLibraryError:
            return celtypes.BoolType(False)
        return celtypes.BoolType(True)

    return check


def _sign(number: Fraction | int) -> int:
    return (number > 0) - (number < 0)


def compare_to(a: object, b: object) -> celtypes.IntType:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return celtypes.IntType(_sign(a.value - b.value))
    if isinstance(a, Semver) and isinstance(b, Semver):
        return celtypes.IntType(a.version.compare(b.version))
    raise CelLibraryError(f"no such overload: compareTo({type(a).__name__}, {type(b).__name__})")


def _other(value: object) -> Fraction:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise CelLibraryError(f"no such overload: quantity arithmetic with {type(value).__name__}")


def _quantity(receiver: object, function: str) -> Quantity:
    if not isinstance(receiver, Quantity):
        raise CelLibraryError(f"no such overload: {type(receiver).__name__}.{function}()")
    return receiver


def _semver(receiver: object, function: str) -> semver.Version:
    if not isinstance(receiver, Semver):
        raise CelLibraryError(f"no such overload: {type(receiver).__name__}.{function}()")
    return receiver.version


def as_integer(q: object) -> celtypes.IntType:
    value = _quantity(q, "asInteger").value
    if value.denominator != 1 or not INT64_MIN <= value <= INT64_MAX:
        raise CelLibraryError("cannot convert value to integer")
    return celtypes.IntType(int(value))


def _index_of(haystack: Any, needle: Any, *start: Any) -> celtypes.IntType:
    if isinstance(haystack, str):
        offset = int(start[0]) if start else 0
        if not 0 <= offset <= len(haystack):
            raise CelLibraryError(f"index out of range: {offset}")
        return celtypes.IntType(haystack.find(needle, offset))
    if isinstance(haystack, list):
        return celtypes.IntType(next((i for i, x in enumerate(haystack) if x == needle), -1))
    raise CelLibraryError(f"no such overload: {type(haystack).__name__}.indexOf()")


def _last_index_of(haystack: Any, needle: Any) -> celtypes.IntType:
    if isinstance(haystack, str):
        return celtypes.IntType(haystack.rfind(needle))
    if isinstance(haystack, list):
        found = [i for i, x in enumerate(haystack) if x == needle]
        return celtypes.IntType(found[-1] if found else -1)
    raise CelLibraryError(f"no such overload: {type(haystack).__name__}.lastIndexOf()")


def _split(text: str, separator: str, *limit: int) -> celtypes.ListType:
    parts = str(text).split(separator, int(limit[0]) - 1) if limit and int(limit[0]) > 0 else str(text).split(separator)
    if limit and int(limit[0]) == 0:
        parts = []
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(text: str, start: int, *end: int) -> celtypes.StringType:
    stop = int(end[0]) if end else len(text)
    if not 0 <= int(start) <= stop <= len(text):
        raise CelLibraryError(f"index out of range: substring({start}, {stop}) of {len(text)} characters")
    return celtypes.StringType(text[int(start) : stop])


def _find(text: str, pattern: str) -> celtypes.StringType:
    found = re2.search(str(pattern), str(text))
    return celtypes.StringType(found.group(0) if found else "")


def _find_all(text: str, pattern: str, *limit: int) -> celtypes.ListType:
    found = [celtypes.StringType(m.group(0)) for m in re2.finditer(str(pattern), str(text))]
    return celtypes.ListType(found[: int(limit[0])] if limit and int(limit[0]) >= 0 else found)


def _list_of(values: Any, function: str) -> list[Any]:
    if not isinstance(values, list):
        raise CelLibraryError(f"no such overload: {type(values).__name__}.{function}()")
    return list(values)


def _min_max(function: str, pick: Callable[[list[Any]], Any]) -> Callable[[Any], Any]:
    def run(values: Any) -> Any:
        items = _list_of(values, function)
        if not items:
            raise CelLibraryError(f"{function}(list) called on an empty list")
        return pick(items)

    return run


def _is_greater(a: object, b: object) -> celtypes.BoolType:
    return celtypes.BoolType(compare_to(a, b) > 0)


def _is_less(a: object, b: object) -> celtypes.BoolType:
    return celtypes.BoolType(compare_to(a, b) < 0)


_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _kind(value: object) -> str:
    if isinstance(value, celtypes.BoolType):
        return "bool"
    if isinstance(value, _NUMBERS):
        return "number"
    return type(value).__name__


def equal(a: Any, b: Any) -> Any:
    """CEL's ==; an error value on either side stays the error."""
    for side in (a, b):
        if isinstance(side, CELEvalError):
            return side
    if _kind(a) != _kind(b):
        return celtypes.BoolType(False)
    if _kind(a) == "number" and type(a) is not type(b):
        return celtypes.BoolType(Fraction(a) == Fraction(b))
    return bool_eq(a, b)


def includes(attribute: Any, value: Any) -> Any:
    """KEP-5491's helper: a list attribute holds the value, or a scalar attribute equals it."""
    if isinstance(attribute, list):
        found = [equal(item, value) for item in attribute]
        return celtypes.BoolType(any(isinstance(f, celtypes.BoolType) and bool(f) for f in found))
    return equal(attribute, value)


def not_equal(a: Any, b: Any) -> Any:
    same = equal(a, b)
    return same if isinstance(same, CELEvalError) else celtypes.BoolType(not same)


FUNCTIONS: Mapping[str, Callable[..., Any]] = MappingProxyType(
    {
        "_==_": equal,
        "_!=_": not_equal,
        "includes": includes,
        "quantity": make_quantity,
        "isQuantity": _is(make_quantity),
        "semver": make_semver,
        "isSemver": _is(make_semver),
        "compareTo": compare_to,
        "isGreaterThan": _is_greater,
        "isLessThan": _is_less,
        "sign": lambda q: celtypes.IntType(_sign(_quantity(q, "sign").value)),
        "isInteger": lambda q: celtypes.BoolType(_quantity(q, "isInteger").value.denominator == 1),
        "asInteger": as_integer,
        "asApproximateFloat": lambda q: celtypes.DoubleType(float(_quantity(q, "asApproximateFloat").value)),
        "add": lambda q, o: Quantity(_quantity(q, "add").value + _other(o)),
        "sub": lambda q, o: Quantity(_quantity(q, "sub").value - _other(o)),
        "major": lambda v: celtypes.IntType(_semver(v, "major").major),
        "minor": lambda v: celtypes.IntType(_semver(v, "minor").minor),
        "patch": lambda v: celtypes.IntType(_semver(v, "patch").patch),
        "lowerAscii": lambda s: celtypes.StringType("".join(c.lower() if c.isascii() else c for c in s)),
        "upperAscii": lambda s: celtypes.StringType("".join(c.upper() if c.isascii() else c for c in s)),
        "trim": lambda s: celtypes.StringType(str(s).strip()),
        "split": _split,
        "join": lambda values, *sep: celtypes.StringType((sep[0] if sep else "").join(_list_of(values, "join"))),
        "replace": lambda s, old, new, *n: celtypes.StringType(str(s).replace(old, new, int(n[0]) if n else -1)),
        "substring": _substring,
        "charAt": lambda s, i: celtypes.StringType(str(s)[int(i)] if 0 <= int(i) < len(s) else ""),
        "indexOf": _index_of,
        "lastIndexOf": _last_index_of,
        "find": _find,
        "findAll": _find_all,
        "sum": lambda values: sum(_list_of(values, "sum"), celtypes.IntType(0)),
        "min": _min_max("min", min),
        "max": _min_max("max", max),
        "isSorted": lambda values: celtypes.BoolType(_list_of(values, "isSorted") == sorted(values)),
    }
)
