"""The gang's answer: each member's node and devices from the best plan, or the reason none fits."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine.cluster.index import ClusterIndex
from engine.cluster.network import NetworkTree
from engine.core.model import PodRequest
from engine.decide.gang.plan import Plan
from engine.decide.gang.ranks import member_key, rank_of
from engine.decide.gang.request import GangDecision, GangRequest, MemberPlacement
from engine.decide.gang.slots import Shape
from engine.decide.kube.messages import fit_error_message
from engine.node.answer import NodeFit


def placed_decision(
    gang: GangRequest,
    tree: NetworkTree,
    index: ClusterIndex,
    shapes: list[Shape],
    plan: Plan,
    fits: dict[tuple[bytes, str], tuple[NodeFit, ...]],
    running: list[PodRequest],
    planned: int,
    *,
    unit_of: dict[str, str],
    partial: str = "",
) -> GangDecision:
    """The plan's members on their nodes; `partial`: why the members the plan leaves out wait."""
    shape_of = {m.uid: s for s in shapes for m in s.members}
    members = {m.uid: m for s in shapes for m in s.members}
    placements: dict[str, MemberPlacement] = {}
    for uid, node_name, nth in plan.assignments:
        shape = shape_of[uid]
        fit = fits[(shape.key, node_name)][nth]
        node = index.node(node_name)
        uuids = {d.index: d.uuid for d in node.devices}
        device_request = shape.claim.request
        parts = dict(fit.choice.parts)
        parts.update(fit.score.parts)
        placements[uid] = MemberPlacement(
            name=members[uid].name,
            uid=uid,
            node=node_name,
            devices=tuple(msgspec.structs.replace(a, uuid=uuids.get(a.index, "")) for a in fit.choice.assignments),
            score=fit.score.score,
            score_parts=parts,
            qos=device_request.qos if device_request is not None else "",
            app_class=device_request.app_class if device_request is not None else "",
        )
    pending = list(members.values())
    left = len(pending) - len(placements)
    return decision_of(
        gang,
        tree,
        index,
        pending,
        placements,
        running,
        placed=True,
        reason=partial if left else "",
        planned=planned,
        unit_of=unit_of,
        partial=bool(left),
    )


def decision_of(
    gang: GangRequest,
    tree: NetworkTree,
    index: ClusterIndex,
    pending: Sequence[PodRequest],
    placements: dict[str, MemberPlacement],
    running: list[PodRequest],
    *,
    placed: bool,
    reason: str,
    planned: int = 0,
    unit_of: dict[str, str] | None = None,
    partial: bool = False,
) -> GangDecision:
    """Every member's answer (running ones too) in rank order, with its rank, domain and subgroup."""
    unit_of = unit_of or {}
    members = [(p, placements.get(p.uid, MemberPlacement(name=p.name, uid=p.uid))) for p in pending]
    members += [(p, MemberPlacement(name=p.name, uid=p.uid, node=p.node_name, running=True)) for p in running]
    members.sort(key=lambda pm: member_key(pm[0]))
    pods = [
        msgspec.structs.replace(
            m,
            rank=rank_of(p),
            domain=tree.leaf_of(m.node) if m.node is not None and tree.is_node(m.node) else None,
            sub_group=unit_of.get(p.uid, ""),
        )
        for p, m in members
    ]
    nodes = [p.node for p in pods if p.node is not None and tree.is_node(p.node)]
    hypernode = tree.lca(nodes) if placed and nodes else None
    return GangDecision(
        gang=gang.name,
        placed=placed,
        hypernode=hypernode,
        tier=tree.tier_of(hypernode) if hypernode is not None else None,
        pods=tuple(pods),
        reason=reason,
        hypernodes_planned=planned,
        partial=partial,
    )


def why_not(
    index: ClusterIndex,
    gang: GangRequest,
    node_reasons: list[str],
    hard: bool,
    max_tier: int,
    best_slots: int,
    need: dict[bytes, int],
    refused: str = "",
) -> str:
    """The gang's reason: how many members the best domain holds, why each tier was refused, and
    kube-scheduler's count of every node's reasons."""
    total = sum(need.values())
    where = f"no hypernode of tier <= {max_tier}" if hard else "no part of the network tree"
    head = f"gang {gang.name}: {where} holds its {total} pending member(s) (at most {best_slots} fit in one)"
    if gang.sub_groups:
        head += ", each subgroup inside its own limit"
    if refused:
        head += f"; {refused}"
    return f"{head}; {fit_error_message(len(index), node_reasons)}" if node_reasons else head
