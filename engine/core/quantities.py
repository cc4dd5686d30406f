"""Kubernetes resource quantities and annotation values, read strictly.

Bad input raises RequestError naming the resource or annotation and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from engine.core.errors import RequestError
from schemas.quantity import QuantityError
from schemas.quantity import parse_quantity as parse_exact

_LARGEST = 2**63 - 1


def parse_quantity(field: str, text: str) -> Fraction:
    """A Kubernetes quantity ("2", "500m", "8Gi", "1e0") as an exact number (schemas.quantity's grammar)."""
    try:
        number = parse_exact(text)
    except QuantityError as exc:
        raise RequestError(field, f"is not a Kubernetes quantity: {text!r}") from exc
    if number < 0:
        raise RequestError(field, f"must not be negative, got {text!r}")
    if number > _LARGEST:  # "1e999999" is a quantity, but no device count or size
        raise RequestError(field, f"is too large, got {text!r}")
    return Fraction(number)


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
