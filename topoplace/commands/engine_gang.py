"""`engine place --cluster` for a gang: several Pods of one group placed together (engine_cluster.py
reads the cluster and hands them here).

The answer is `engine place --snapshot`'s gang answer; each member carries its `claims`, allocated
jointly with the gang's choice. When the gang fits nowhere as things are, the domain where it runs by
preemption, each member with the victims on its node.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from topoplace.commands.exit_codes import NO_PLACE, OK
from topoplace.feature_gates import FeatureGates

if TYPE_CHECKING:
    from engine import PodRequest
    from engine.decide.preempt import RunningPod as PreemptiblePod
    from engine.decide.preempt.gang import GangPreemption
    from topoplace.cluster_objects.cluster import ClusterRead


def place_gang(cluster: ClusterRead, pods: list[PodRequest], args: argparse.Namespace, gates: dict[str, bool]) -> int:
    """The gang answer (`engine place --snapshot` with `gang`), each member's claims allocated on its
    node; when it fits nowhere as things are, the
    domain where it runs by preemption, each member with the victims on its node (engine/decide/preempt/
    gang.py). Kueue's gates (TASBalancedPlacement) go to the gang, as Kueue's --feature-gates switch
    them. RequestError / ValueError: bad input."""
    import msgspec

    from engine import Engine, Mode
    from engine.cluster.network import build_tree
    from engine.decide.gang import GangDecision, MemberPlacement
    from engine.decide.gang.input import gang_request
    from topoplace.cluster_objects.gang_claims import gang_claims
    from topoplace.cluster_objects.gang_input import gang_of, with_gang_tree
    from topoplace.cluster_objects.priority import Priorities, read_preemptor

    if args.node is not None:
        raise ValueError("--node: not with a gang (its members are placed inside one network domain)")
    given = gang_of(pods, args.pods, cluster.gangs)
    kueue = FeatureGates(gates=gates).kueue()
    given = msgspec.structs.replace(given, kueue_feature_gates={**given.kueue_feature_gates, **kueue})
    claims = gang_claims(pods, args.pods, cluster.dra, FeatureGates(gates=gates).dra_features(), given.workload_group)
    if isinstance(claims, str):  # a claim it cannot have yet: the gang waits, as kube-scheduler says
        name = gang_request(given).name
        members = tuple(MemberPlacement(name=p.name, uid=p.uid) for p in pods)
        waiting = GangDecision(gang=name, placed=False, pods=members, reason=f"gang {name}: {claims}")
        print(
            msgspec.json.format(
                msgspec.json.encode({**msgspec.to_builtins(waiting), "problems": []}).decode(), indent=2
            )
        )
        return NO_PLACE
    snapshot, mode, engine = with_gang_tree(cluster.snapshot, given, cluster.gangs), Mode(args.mode), Engine()
    built = build_tree(
        snapshot.hypernodes, {n.name: n.labels for n in snapshot.nodes}, topology_levels=snapshot.topology_levels
    )
    gang = gang_request(given)
    index = engine.index_of(snapshot)
    decision = engine.place_gang(index, built.tree, gang, mode, workload=snapshot.workload, claims=claims)
    answer: dict[str, Any] = msgspec.to_builtins(decision)
    answer["problems"] = [f"{p.object}: {p.field}: {p.reason}" for p in built.problems]
    # Gang preemption does not allocate claims yet: a gang with claims is not placed by evicting others.
    if not decision.placed and claims is None:
        preemptor = read_preemptor(args.pods, pods[0], Priorities(cluster.priority_classes))
        running = [_with_group_minimum(p, cluster) for p in cluster.running]
        result = engine.preempt_gang(index, built.tree, gang, preemptor.priority, running, cluster.budgets, mode,
                                     policy=preemptor.policy, workload=snapshot.workload)  # fmt: skip
        answer = _gang_preempted(answer, result, running)
    print(msgspec.json.format(msgspec.json.encode(answer).decode(), indent=2))
    return OK if answer["placed"] else NO_PLACE


def _with_group_minimum(pod: PreemptiblePod, cluster: ClusterRead) -> PreemptiblePod:
    """A member of a Volcano group with its PodGroup's minMember (when a file holds the PodGroup)."""
    import msgspec

    group = cluster.gangs.volcano.get(pod.gang) if pod.gang else None
    return msgspec.structs.replace(pod, gang_min_member=group.spec.min_member) if group is not None else pod


def _gang_preempted(answer: dict[str, Any], result: GangPreemption, running: list[PreemptiblePod]) -> dict[str, Any]:
    """The gang's answer once placed by preemption: each member nominated to its node, with the victims
    there; or the reason, with preemption's own."""
    import msgspec

    if result.decision is None:
        return {**answer, "reason": f"{answer['reason']} {result.reason}"}
    node_of = {p.key: p.node for p in running}
    members = []
    for member in msgspec.to_builtins(result.decision.pods):
        here = [v.pod for v in result.victims if node_of.get(v.pod) == member["node"]]
        members.append({**member, "victims": here, "nominated": not member["running"]})
    return {
        **msgspec.to_builtins(result.decision),
        "pods": members,
        "problems": answer["problems"],
        "victims": [v.pod for v in result.victims],
        "nominated": True,
        "preemption": {
            "unschedulable": answer["reason"],
            "hypernode": result.hypernode,
            "tier": result.tier,
            "budget_violations": result.budget_violations,
            "whole_gangs": list(result.whole_gangs),
            "victims": [msgspec.to_builtins(v) for v in result.victims],
        },
    }
