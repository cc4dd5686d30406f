"""Kubernetes resource quantities and annotation values, read strictly.

Bad input raises RequestError naming the resource or annotation and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

from services.placer.engine.vendor import RequestError

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_quantity(field: str, text: str) -> Fraction:
    """A Kubernetes quantity ("2", "500m", "8Gi") as an exact number."""
    match = _QUANTITY.match(text)
    if match is None or match.group(2) not in _SUFFIX:
        raise RequestError(field, f"is not a Kubernetes quantity: {text!r}")
    return Fraction(match.group(1)) * _SUFFIX[match.group(2)]


def parse_int(field: str, text: str, *, low: int = 0, high: int | None = None) -> int:
    """A whole-number quantity within [low, high]."""
    value = parse_quantity(field, text)
    if value.denominator != 1:
        raise RequestError(field, f"must be a whole number, got {text!r}")
    number = int(value)
    if number < low or (high is not None and number > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise RequestError(field, f"must be {bounds}, got {text!r}")
    return number


def optional_int(requests: Mapping[str, str], field: str, *, low: int = 0, high: int | None = None) -> int | None:
    text = requests.get(field)
    return None if text is None else parse_int(field, text, low=low, high=high)


def parse_bool(field: str, text: str) -> bool:
    """Go's strconv.ParseBool spellings, which HAMi's annotations use."""
    lowered = text.strip()
    if lowered in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if lowered in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise RequestError(field, f"must be true or false, got {text!r}")


def split_list(text: str) -> tuple[str, ...]:
    """A comma list, blanks dropped, order kept."""
    return tuple(part.strip() for part in text.split(",") if part.strip())
