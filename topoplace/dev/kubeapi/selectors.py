"""Label and field selectors, parsed once per request into predicates over an object."""

from __future__ import annotations

import enum
import re
from typing import Any

import msgspec

from topoplace.dev.kubeapi.errors import bad_request


class Op(enum.StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    NOT_EXISTS = "!"


class Requirement(msgspec.Struct, frozen=True):
    key: str
    op: Op
    values: frozenset[str] = frozenset()


class Selector(msgspec.Struct, frozen=True):
    """Every label and field requirement of one request; empty matches everything."""

    labels: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.labels and not self.fields

    def matches(self, obj: dict[str, Any]) -> bool:
        if self.labels:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if not all(_label_ok(r, labels) for r in self.labels):
                return False
        return all(_field_ok(r, obj) for r in self.fields)


def _label_ok(req: Requirement, labels: dict[str, str]) -> bool:
    present = req.key in labels
    value = labels.get(req.key)
    if req.op is Op.EXISTS:
        return present
    if req.op is Op.NOT_EXISTS:
        return not present
    if req.op is Op.EQUALS or req.op is Op.IN:
        return present and value in req.values
    # != and notin also match objects without the label, as Kubernetes does
    return not present or value not in req.values


def _field_ok(req: Requirement, obj: dict[str, Any]) -> bool:
    value = field_value(obj, req.key)
    if req.op is Op.EQUALS:
        return value in req.values
    return value not in req.values


def field_value(obj: dict[str, Any], path: str) -> str:
    """A field as fieldSelector compares it: a string, "" when absent, booleans as true/false."""
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
        if node is None:
            return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


# --- parsing ----------------------------------------------------------------------------------

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_./-]*)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses (`a in (x,y),b` is two requirements)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    reqs: list[Requirement] = []
    for part in _split_top_level(text):
        eq = _EQ_RE.match(part)
        if eq:
            key, op, value = eq.groups()
            reqs.append(Requirement(key, Op.NOT_EQUALS if op == "!=" else Op.EQUALS, frozenset({value})))
            continue
        m = _SET_RE.match(part)
        if not m:
            raise bad_request(f"unable to parse requirement: {part.strip()!r}")
        bang, key, set_op, values = m.groups()
        if set_op:
            if bang:
                raise bad_request(f"unable to parse requirement: {part.strip()!r}")
            items = frozenset(v.strip() for v in values.split(",") if v.strip())
            reqs.append(Requirement(key, Op.IN if set_op == "in" else Op.NOT_IN, items))
        else:
            reqs.append(Requirement(key, Op.NOT_EXISTS if bang else Op.EXISTS))
    return tuple(reqs)


def parse_field_selector(text: str, allowed: frozenset[str]) -> tuple[Requirement, ...]:
    reqs: list[Requirement] = []
    for part in (p for p in text.split(",") if p.strip()):
        m = _EQ_RE.match(part)
        if not m:
            raise bad_request(f"invalid field selector: {part.strip()!r}")
        key, op, value = m.groups()
        if key not in allowed:
            raise bad_request(f"field label not supported: {key}")
        reqs.append(Requirement(key, Op.NOT_EQUALS if op == "!=" else Op.EQUALS, frozenset({value})))
    return tuple(reqs)


def parse_selector(label_selector: str, field_selector: str, allowed_fields: frozenset[str]) -> Selector:
    return Selector(
        labels=parse_label_selector(label_selector) if label_selector else (),
        fields=parse_field_selector(field_selector, allowed_fields) if field_selector else (),
    )
