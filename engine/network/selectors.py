"""Which nodes a HyperNode member selects, as Volcano resolves it (pkg/scheduler/api GetMembers).

* `exactMatch.name`: that node (or HyperNode) by name;
* `regexMatch.pattern`: every node whose name the pattern matches *anywhere*
  (Go's `regexp.MatchString` is a search, not a full match: anchor with ^...$).
  Python's `re` reads the RE2 syntax Volcano users write (classes, anchors,
  repetition, groups); RE2-only escapes such as `\\z` fail to compile and are reported;
* `labelMatch`: a metav1.LabelSelector over node labels; matchLabels and
  matchExpressions (In, NotIn, Exists, DoesNotExist) all hold. An empty one
  selects nothing, as in Volcano.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from engine.network.objects import LabelMatch, LabelRequirement, Member, MemberSelector

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """A selector that cannot be applied; `field` is relative to the member's selector."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def selector_kind(selector: MemberSelector) -> str:
    """ "exactMatch", "regexMatch" or "labelMatch"; the CRD allows exactly one."""
    given = [
        name
        for name, value in (
            ("exactMatch", selector.exact_match),
            ("regexMatch", selector.regex_match),
            ("labelMatch", selector.label_match),
        )
        if value is not None
    ]
    if len(given) != 1:
        found = ", ".join(given) if given else "none"
        reason = f"exactly one of exactMatch, regexMatch, labelMatch is required (found {found})"
        raise SelectorError("selector", reason)
    return given[0]


def _requirement_holds(req: LabelRequirement, labels: Mapping[str, str]) -> bool:
    if req.operator == "In":
        return req.key in labels and labels[req.key] in req.values
    if req.operator == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if req.operator == "Exists":
        return req.key in labels
    return req.key not in labels  # DoesNotExist (checked before)


def check_label_match(match: LabelMatch) -> None:
    for i, req in enumerate(match.match_expressions):
        field = f"selector.labelMatch.matchExpressions[{i}]"
        if req.operator not in OPERATORS:
            allowed = ", ".join(OPERATORS)
            raise SelectorError(f"{field}.operator", f"unknown operator {req.operator!r} (allowed: {allowed})")
        if req.operator in ("In", "NotIn") and not req.values:
            raise SelectorError(f"{field}.values", f"{req.operator} needs at least one value")
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            raise SelectorError(f"{field}.values", f"{req.operator} takes no values")


def label_match_selects(match: LabelMatch, labels: Mapping[str, str]) -> bool:
    if not match.match_labels and not match.match_expressions:
        return False
    if any(labels.get(k) != v for k, v in match.match_labels.items()):
        return False
    return all(_requirement_holds(req, labels) for req in match.match_expressions)


def select_nodes(member: Member, node_names: Sequence[str], labels: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The nodes a `Node` member selects, in `node_names` order; SelectorError if it cannot apply.

    An exact name that is not a known node raises too: the caller reports it.
    """
    sel = member.selector
    kind = selector_kind(sel)
    if kind == "exactMatch":
        assert sel.exact_match is not None
        if sel.exact_match.name not in labels:
            raise SelectorError("selector.exactMatch.name", f"no node {sel.exact_match.name!r}")
        return [sel.exact_match.name]
    if kind == "regexMatch":
        assert sel.regex_match is not None
        try:
            pattern = re.compile(sel.regex_match.pattern)
        except re.error as exc:
            raise SelectorError("selector.regexMatch.pattern", f"does not compile: {exc}") from exc
        return [name for name in node_names if pattern.search(name)]
    assert sel.label_match is not None
    check_label_match(sel.label_match)
    return [name for name in node_names if label_match_selects(sel.label_match, labels[name])]


def hypernode_member_name(member: Member) -> str:
    """The name a `HyperNode` member names; only exactMatch applies (Volcano's webhook and cache)."""
    kind = selector_kind(member.selector)
    if kind != "exactMatch":
        raise SelectorError(f"selector.{kind}", "a HyperNode member is selected by exactMatch only")
    assert member.selector.exact_match is not None
    return member.selector.exact_match.name
