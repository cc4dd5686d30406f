"""Which nodes a HyperNode member selects, as Volcano resolves it (pkg/scheduler/api GetMembers).

* `exactMatch.name`: that node (or HyperNode) by name;
* `regexMatch.pattern`: every node whose name the pattern matches *anywhere*
  (Volcano compiles it with Go's `regexp.Compile` and asks `MatchString`, a search,
  not a full match: anchor with ^...$). The pattern is RE2, evaluated by RE2 itself
  (Google's binding), so matching takes time linear in the name whatever the pattern:
  a backtracking engine spent seconds on `^(\\w+-?)+-h100-\\d+$` and one node name.
  What RE2 refuses (backreferences, lookaround) is reported, as Volcano's
  compile error leaves the member without nodes;
* `labelMatch`: a metav1.LabelSelector over node labels; matchLabels and
  matchExpressions (In, NotIn, Exists, DoesNotExist) all hold. An empty one
  selects nothing, as in Volcano.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import re2

from engine.core.hypernodes import LabelMatch, LabelRequirement, Member, MemberSelector

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# RE2's own memory bound for one compiled pattern (its default): a pattern whose program would
# exceed it does not compile, and is reported like any other.
PATTERN_MAX_MEM = 8 << 20


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


def compile_node_pattern(pattern: str) -> re2._Regexp[str]:
    """The pattern as RE2 reads it (Go's regexp syntax: Perl classes, `^`/`$` at the name's ends).

    Raises SelectorError naming `selector.regexMatch.pattern` when RE2 refuses it."""
    options = re2.Options()
    options.log_errors = False  # the refusal is reported as a tree problem, not on stderr
    options.max_mem = PATTERN_MAX_MEM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise SelectorError("selector.regexMatch.pattern", f"does not compile as RE2: {detail}") from None


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
        pattern = compile_node_pattern(sel.regex_match.pattern)
        return [name for name in node_names if pattern.search(name) is not None]
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
