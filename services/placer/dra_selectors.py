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
_LITERAL = re.compile(r"""^(?:"(?P<dq>[^"\\]*)"|'(?P<sq>[^'\\]*)'|(?P<int>-?\d+)|(?P<bool>true|false))$""")


class SelectorError(ValueError):
    pass


class Term(msgspec.Struct, frozen=True, kw_only=True):
    """One comparison: `field` is "driver" or a fully qualified attribute name."""

    field: str
    value: AttributeValue
    equal: bool = True


def _literal(text: str, expression: str) -> AttributeValue:
    match = _LITERAL.match(text.strip())
    if match is None:
        raise SelectorError(f"selector {expression!r}: {text.strip()!r} is not a string, integer or boolean literal")
    if match["dq"] is not None:
        return match["dq"]
    if match["sq"] is not None:
        return match["sq"]
    if match["int"] is not None:
        return int(match["int"])
    return match["bool"] == "true"


def _field(text: str, expression: str) -> str:
    text = text.strip()
    if _DRIVER.fullmatch(text):
        return "driver"
    match = _ATTRIBUTE.fullmatch(text)
    if match is None:
        raise SelectorError(
            f'selector {expression!r}: {text!r} is not device.driver or device.attributes["<domain>"].<name>'
        )
    return f"{match['domain']}/{match['attr'] or match['attr2']}"


def parse(expression: str) -> tuple[Term, ...]:
    """The terms of a supported selector; raises SelectorError naming what is not supported."""
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
            raise SelectorError(f"selector {expression!r}: {part!r} is not an equality (only == and != joined by &&)")
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
