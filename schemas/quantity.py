"""Kubernetes resource quantities, read exactly as the API server reads them.

One parser for the whole project (the collector's translation, the engine's
resource checks and the vendors' integer values all use it). It follows
k8s.io/apimachinery/pkg/api/resource (quantity.go, suffix.go):

    <quantity> ::= <sign>? <digits> ("." <digits>?)? <suffix>  |  <sign>? "." <digits> <suffix>
    <suffix>   ::= "" | n | u | m | k | M | G | T | P | E        (powers of ten)
                 | Ki | Mi | Gi | Ti | Pi | Ei                    (powers of two)
                 | (e | E) <sign>? <digits>                       (a decimal exponent)

so "2", "100m", "16Gi", "1e3", "1e0", "1.5", "+2", ".5", "1." and "1.G" are
quantities, and "1ki", "1KiB", "1e", "1 Gi" and "" are not. Like the API
server, a value is rounded up (away from zero) to a whole nano, and a binary
quantity is capped at 2^63-1. Two deliberate differences: surrounding
whitespace is ignored (the API server trims it when it decodes JSON), and a
number needs a digit (kube's scanner reads a bare "+" or "." as zero; the API
server never writes them). Exponents must fit in 32 bits, as kube stores them.
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, ROUND_UP, Context, Decimal

__all__ = ["QuantityError", "milli_value", "parse_quantity", "resource_milli", "value"]

_DECIMAL_EXPONENT = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXPONENT = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SHAPE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.ASCII | re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)", re.ASCII)
_INT32 = 2**31
_INT64_MAX = 2**63 - 1
_NANO = Decimal("1e-9")
_MILLI = Decimal(1000)
# Exact arithmetic: the default context would round to 28 digits.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity; the message names the value."""


def parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity ("2", "100m", "16Gi", "1e3"); QuantityError names the bad value."""
    match = _SHAPE.fullmatch(text.strip())
    if match is None:  # pragma: no cover - the pattern matches every string
        raise _error(text, "")
    sign, whole, fraction, suffix = match.groups()
    if not whole and not fraction:
        raise _error(text, "it has no digits")
    binary = suffix in _BINARY_EXPONENT
    if binary:
        exponent = 0
    elif suffix in _DECIMAL_EXPONENT:
        exponent = _DECIMAL_EXPONENT[suffix]
    else:
        written = _EXPONENT.fullmatch(suffix)
        if written is None:
            raise _error(text, f"unknown suffix {suffix!r}")
        digits = written.group(1).lstrip("+-").lstrip("0")
        exponent = int(written.group(1)) if len(digits) <= 10 else _INT32
        if not -_INT32 <= exponent < _INT32:
            raise _error(text, "its exponent is out of range")
    # Decimal reads "<digits>.<digits>e<n>" exactly, without a context.
    number = Decimal(f"{sign}{whole or '0'}.{fraction or '0'}e{exponent}")
    if binary:
        number = _EXACT.multiply(number, Decimal(2 ** _BINARY_EXPONENT[suffix]))
    exponent_of = number.as_tuple().exponent
    if isinstance(exponent_of, int) and exponent_of < -9:
        number = number.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)
    if binary and abs(number) > _INT64_MAX:
        number = Decimal(_INT64_MAX).copy_sign(number)
    return number


def milli_value(text: str) -> int:
    """The quantity in thousandths, rounded up (Quantity.MilliValue): "100m" -> 100, "0.5m" -> 1."""
    return _to_int64(text, _EXACT.multiply(parse_quantity(text), _MILLI))


def value(text: str) -> int:
    """The quantity as a whole number, rounded up (Quantity.Value): "16Gi" -> 17179869184, "1.5" -> 2."""
    return _to_int64(text, parse_quantity(text))


def resource_milli(resource: str, text: str) -> int:
    """An amount of `resource` in thousandths, rounded as kube-scheduler adds it (framework.Resource.Add):
    cpu is Quantity.MilliValue(), every other resource Quantity.Value() (whole units, rounded up) times
    1000, so "1.5" bytes of memory is 2000. The engine and the binder both count resources so."""
    return milli_value(text) if resource == "cpu" else value(text) * 1000


def _to_int64(text: str, number: Decimal) -> int:
    if abs(number) > _INT64_MAX:
        raise _error(text, "it does not fit in 64 bits")
    return int(number.to_integral_value(rounding=ROUND_CEILING))


def _error(text: str, why: str) -> QuantityError:
    detail = f": {why}" if why else ""
    return QuantityError(f"{text!r} is not a Kubernetes quantity{detail}")
