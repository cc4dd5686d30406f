"""Small builders for network-tree tests: HyperNode objects and node label maps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.core.hypernodes import (
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    LabelMatch,
    LabelRequirement,
    Member,
    MemberSelector,
    MemberType,
    ObjectMeta,
    RegexMatch,
)


def hn(name: str, tier: int, *members: Member, tier_name: str = "") -> HyperNode:
    spec = HyperNodeSpec(tier=tier, tier_name=tier_name, members=members)
    return HyperNode(metadata=ObjectMeta(name=name), spec=spec)


def node(name: str) -> Member:
    return Member(type="Node", selector=MemberSelector(exact_match=ExactMatch(name=name)))


def sub(name: str) -> Member:
    return Member(type="HyperNode", selector=MemberSelector(exact_match=ExactMatch(name=name)))


def regex(pattern: str, kind: MemberType = "Node") -> Member:
    return Member(type=kind, selector=MemberSelector(regex_match=RegexMatch(pattern=pattern)))


def labelled(
    match_labels: Mapping[str, str] | None = None, expressions: Sequence[tuple[str, str, Sequence[str]]] = ()
) -> Member:
    reqs = tuple(LabelRequirement(key=k, operator=op, values=tuple(v)) for k, op, v in expressions)
    match = LabelMatch(match_labels=dict(match_labels or {}), match_expressions=reqs)
    return Member(type="Node", selector=MemberSelector(label_match=match))


def plain(*names: str) -> dict[str, dict[str, str]]:
    return {n: {"kubernetes.io/hostname": n} for n in names}


def volcano_example() -> list[HyperNode]:
    """Volcano's documented three-tier tree: s6 over s4, s5 over four ToRs s0..s3 of two nodes each."""
    return [
        hn("s0", 1, node("node0"), node("node1")),
        hn("s1", 1, node("node2"), node("node3")),
        hn("s2", 1, node("node4"), node("node5")),
        hn("s3", 1, node("node6"), node("node7")),
        hn("s4", 2, sub("s0"), sub("s1")),
        hn("s5", 2, sub("s2"), sub("s3")),
        hn("s6", 3, sub("s4"), sub("s5")),
    ]
