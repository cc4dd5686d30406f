"""The CEL selectors of DRA requests that the placer evaluates itself; pure.

Supported: a conjunction (`&&`) of equalities (`==`, `!=`) between a device field and a
literal:

    device.driver == "gpu.nvidia.com"
    device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"
    device.attributes["resource.kubernetes.io"]["pcieRoot"] == "pci0000:00"
    device.attributes["gpu.nvidia.com"].index != 3

Literals: double- or single-quoted strings, integers, true, false. Anything else is
refused with a SelectorError naming the expression, rather than guessed: a selector
the placer cannot read must not select devices the claim did not ask for.

The expression comes from a tenant's claim, so reading it is bounded as the API server
and cel-go bound it: at most 10 KiB (resource.k8s.io's CELSelectorExpressionMaxLength),
brackets nested at most MAX_NESTING deep, integers within CEL's int64. Every refusal is a
SelectorError; the claim's pod is then reported unschedulable with it, never left undecided.
"""

from __future__ import annotations

import re

import msgspec

from schemas.dra import AttributeValue, DraDevice

_ATTRIBUTE = re.compile(
    r"""device\.attributes\[\s*(?P<q>["'])(?P<domain>[^"']+)(?P=q)\s*\]"""
    r"""(?:\.(?P<attr>[A-Za-z_][A-Za-z0-9_]*)|\[\s*(?P<q2>["'])(?P<attr2>[^"']+)(?P=q2)\s*\])"""
)
_DRIVER = re.compile(r"device\.driver")
_LITERAL = re.compile(r"""^(?:"(?P<dq>[^"\\]*)"|'(?P<sq>[^'\\]*)'|(?P<int>-?[0-9]+)|(?P<bool>true|false))$""")

MAX_EXPRESSION_LENGTH = 10 * 1024  # resource.k8s.io CELSelectorExpressionMaxLength
MAX_NESTING = 250  # brackets deep: cel-go's parser default (maxRecursionDepth)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT64_DIGITS = len(str(INT64_MAX))
_SHOWN = 80  # characters of the expression quoted in an error


class SelectorError(ValueError):
    pass


def _shown(expression: str) -> str:
    """The expression as an error quotes it: long ones cut, so that a reason stays readable."""
    return repr(expression if len(expression) <= _SHOWN else expression[:_SHOWN] + "...")


class Term(msgspec.Struct, frozen=True, kw_only=True):
    """One comparison: `field` is "driver" or a fully qualified attribute name."""

    field: str
    value: AttributeValue
    equal: bool = True


def _literal(text: str, expression: str) -> AttributeValue:
    match = _LITERAL.match(text.strip())
    if match is None:
        raise SelectorError(
            f"selector {_shown(expression)}: {_shown(text.strip())} is not a string, integer or boolean literal"
        )
    if match["dq"] is not None:
        return match["dq"]
    if match["sq"] is not None:
        return match["sq"]
    if match["int"] is not None:
        digits = match["int"].lstrip("-").lstrip("0")
        value = int(match["int"]) if len(digits) <= _INT64_DIGITS else None  # int() of 4,301 digits raises
        if value is None or not INT64_MIN <= value <= INT64_MAX:
            raise SelectorError(f"selector {_shown(expression)}: integer literal out of CEL's int64 range")
        return value
    return match["bool"] == "true"


def _field(text: str, expression: str) -> str:
    text = text.strip()
    if _DRIVER.fullmatch(text):
        return "driver"
    match = _ATTRIBUTE.fullmatch(text)
    if match is None:
        wanted = 'device.driver or device.attributes["<domain>"].<name>'
        raise SelectorError(f"selector {_shown(expression)}: {_shown(text)} is not {wanted}")
    return f"{match['domain']}/{match['attr'] or match['attr2']}"


def _check_bounds(expression: str) -> None:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorError(
            f"selector {_shown(expression)}: {len(expression)} characters, more than {MAX_EXPRESSION_LENGTH}"
        )
    depth = deepest = 0
    quote = ""
    for char in expression:  # one pass: brackets inside string literals do not count
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]":
            depth -= 1
    if deepest > MAX_NESTING:
        raise SelectorError(f"selector {_shown(expression)}: brackets nested {deepest} deep, more than {MAX_NESTING}")


def parse(expression: str) -> tuple[Term, ...]:
    """The terms of a supported selector; raises SelectorError naming what is not supported."""
    _check_bounds(expression)
    terms = []
    for part in expression.split("&&"):
        part = part.strip()
        while part.startswith("(") and part.endswith(")"):
            part = part[1:-1].strip()
        for op, equal in (("!=", False), ("==", True)):
            if op in part:
                left, right = part.split(op, 1)
                terms.append(Term(field=_field(left, expression), value=_literal(right, expression), equal=equal))
                break
        else:
            raise SelectorError(
                f"selector {_shown(expression)}: {_shown(part)} is not an equality (only == and != joined by &&)"
            )
    return tuple(terms)


def matches(terms: tuple[Term, ...], driver: str, device: DraDevice) -> bool:
    """Whether the device satisfies every term (a device without the attribute never)."""
    for term in terms:
        actual: AttributeValue | None = driver if term.field == "driver" else device.attributes.get(term.field)
        if actual is None:
            return False  # CEL: a missing key is an error, and an erring selector selects nothing
        # CEL never equates a bool and an int; Python would (True == 1)
        same = type(actual) is type(term.value) and actual == term.value
        if same != term.equal:
            return False
    return True
