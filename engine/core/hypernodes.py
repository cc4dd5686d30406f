"""Volcano HyperNodes (topology.volcano.sh/v1alpha1) as `kubectl get hypernodes -o json` prints them.

Field names follow the CRD. A member's selector names exactly one of
`exactMatch` (a node or a HyperNode by name), `regexMatch` (node names) or
`labelMatch` (node labels); Volcano's admission webhook allows the last two for
`Node` members only. The `HyperNodeEvent` of `topology.network` (each member's
selector and the tierName kept) converts to the same object with `from_event`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from schemas.events import HyperNodeEvent, HyperNodeMember, MemberKind

MemberType = Literal["Node", "HyperNode"]


class ExactMatch(msgspec.Struct, frozen=True, kw_only=True):
    name: str


class RegexMatch(msgspec.Struct, frozen=True, kw_only=True):
    pattern: str  # Go RE2 syntax, matched anywhere in the node name (Go's MatchString)


class LabelRequirement(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (metav1.LabelSelector)
    values: tuple[str, ...] = ()


class LabelMatch(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelRequirement, ...] = ()


class MemberSelector(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelMatch | None = None


class Member(msgspec.Struct, frozen=True, kw_only=True):
    type: MemberType
    selector: MemberSelector = MemberSelector()


class HyperNodeSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    tier: int  # lower = closer; the CRD allows 0 and up
    tier_name: str = ""
    members: tuple[Member, ...] = ()


class ObjectMeta(msgspec.Struct, frozen=True, kw_only=True):
    name: str


class HyperNode(msgspec.Struct, frozen=True, kw_only=True):
    metadata: ObjectMeta
    spec: HyperNodeSpec

    @property
    def name(self) -> str:
        return self.metadata.name


class HyperNodeList(msgspec.Struct, frozen=True, kw_only=True):
    """`kubectl get hypernodes -o json`: a List whose items are HyperNodes."""

    items: tuple[HyperNode, ...] = ()


class TreeProblem(msgspec.Struct, frozen=True, kw_only=True):
    """Something in the input the tree could not honour, and what was done instead."""

    object: str  # "hypernode/s0", "node/n1", "topology/levels"
    field: str  # "spec.members[2].selector.regexMatch.pattern", "metadata.labels[...]"
    reason: str

    def __str__(self) -> str:
        return f"{self.object}: {self.field}: {self.reason}"


def exact_member(kind: MemberType, name: str) -> Member:
    return Member(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=name)))


def from_event(event: HyperNodeEvent) -> HyperNode:
    """The `topology.network` event as the HyperNode it was published from (selectors and tierName kept)."""
    members = tuple(_member_from_event(m) for m in event.members)
    spec = HyperNodeSpec(tier=event.tier, tier_name=event.tier_name, members=members)
    return HyperNode(metadata=ObjectMeta(name=event.name), spec=spec)


def _member_from_event(member: HyperNodeMember) -> Member:
    kind: MemberType = "Node" if member.kind is MemberKind.NODE else "HyperNode"
    if member.regex:
        return Member(type=kind, selector=MemberSelector(regex_match=RegexMatch(pattern=member.regex)))
    if member.labels is not None:
        expressions = tuple(
            LabelRequirement(key=e.key, operator=e.operator, values=e.values) for e in member.labels.match_expressions
        )
        labels = LabelMatch(match_labels=dict(member.labels.match_labels), match_expressions=expressions)
        return Member(type=kind, selector=MemberSelector(label_match=labels))
    return exact_member(kind, member.name)


def as_hypernodes(items: object) -> tuple[HyperNode, ...]:
    """HyperNodes from HyperNode objects and/or HyperNodeEvents; deleted events are left out."""
    if not isinstance(items, list | tuple):
        raise TypeError("hypernodes: expected a sequence of HyperNode or HyperNodeEvent")
    out: list[HyperNode] = []
    for item in items:
        if isinstance(item, HyperNode):
            out.append(item)
        elif isinstance(item, HyperNodeEvent):
            if not item.deleted:
                out.append(from_event(item))
        else:
            raise TypeError(f"hypernodes: {type(item).__name__} is neither a HyperNode nor a HyperNodeEvent")
    return tuple(out)


def decode_hypernodes(raw: object) -> tuple[HyperNode, ...]:
    """Plain JSON values (a List object, or a list of objects in either form) as HyperNodes.

    An item with `metadata` is a HyperNode object; one with `name` and `tier` at
    the top is the `topology.network` event. A bad item raises msgspec.ValidationError
    naming the field.
    """
    if isinstance(raw, dict) and "items" in raw:
        raw = raw["items"]
    if not isinstance(raw, list):
        raise msgspec.ValidationError("hypernodes: expected a list or a List object with `items`")
    out: list[HyperNode] = []
    for i, item in enumerate(raw):
        try:
            if isinstance(item, dict) and "metadata" in item:
                out.append(msgspec.convert(item, HyperNode))
            else:
                event = msgspec.convert(item, HyperNodeEvent)
                if not event.deleted:
                    out.append(from_event(event))
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(f"hypernodes[{i}]: {exc}") from exc
    return tuple(out)
