"""`topoplace engine place --cluster FILE ... --pods FILE`: one pod placed on a cluster given as Kubernetes objects.

The answer (JSON):

    {"node": name | null, "devices": [...], "score": number, "reason": text | null,
     "nodes": [{"name", "fits", "reasons": [kube-scheduler's reasons], "score": number | null}, ...],
     "victims": ["namespace/name", ...], "nominated": bool}

with every node listed, by name. A pod that fits nowhere as things are may fit by preemption
(kube's DefaultPreemption, engine/decide/preempt/): `node` is then the node it is nominated to,
`victims` the lower-priority pods to evict first, `nominated` true, and `preemption` says why each
victim (`victims[].why`), the candidate nodes best first, the message it had without eviction, and
for a device pod what counting devices alone would have evicted there (`count_only`).
A pod asking an extended resource only DRA serves on a node (KEP-5004) is placed through the claim
kube-scheduler would make for it (engine_extended.py). A pod with spec.resourceClaims also gets
`"claims": [{"namespace", "name", "allocation": {...status.allocation...}}]`, its claims
allocated as kube-scheduler's structured allocator does on the chosen node (or the next
fitting one); when none can hold them, node is null with kube-scheduler's reason.
Several Pods of one gang get the gang answer (`engine place --snapshot` with `gang`): each
member's node and devices, the hypernode and tier. A gang is a `scheduling.k8s.io` PodGroup or
Workload pod group, a KAI PodGroup, a Volcano PodGroup, or Kueue's pod-group annotations
(topoplace/cluster_objects/gang_input.py); without HyperNodes its tree is the Kueue or KAI Topology it names.
A gang that fits nowhere as things are may fit by preemption inside one network domain
(engine/decide/preempt/gang.py): each member then carries `victims` (those on its node) and
`nominated`, the answer `victims` (all of them, victim gangs' members elsewhere too) and
`preemption` (the domain, whole victim gangs, why each victim).
Each member's `claims` (the single pod's entries) are allocated on its node jointly with the
gang's choice: a claim several members name is allocated once and each of them lands where its
devices are reachable; members of a ComputeDomain (their template is its channel's) stay inside
one NVLink clique (topoplace/cluster_objects/gang_claims.py). The gang's part is engine_gang.py.
Notes (kinds not used yet, devices read without their seal, feature gates) go to stderr, one line
each. Exit codes: 0 placed (or nominated), 1 no place, 2 bad input (one line naming the
file and the field).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from topoplace.commands.engine_gang import place_gang
from topoplace.commands.exit_codes import BAD_INPUT, NO_PLACE, OK
from topoplace.feature_gates import FeatureGates, dra_gates, kueue_gates, parse_feature_gates

if TYPE_CHECKING:
    from engine import Decision, NodeState, PodRequest, Snapshot
    from engine.decide.preempt import Preemptor
    from topoplace.cluster_objects.cluster import ClusterRead


def _note(line: str) -> None:
    print(f"topoplace engine: note: {line}", file=sys.stderr)


def _snapshot_nodes(path: str | None) -> tuple[NodeState, ...]:
    """The nodes of a snapshot file: a PlaceInput ({snapshot, request}) or a bare Snapshot."""
    if path is None:
        return ()
    from pathlib import Path

    import msgspec

    from engine import RequestError, Snapshot
    from engine.core.validate import validate_snapshot
    from topoplace.strict_input import strict_convert

    try:
        raw = msgspec.json.decode(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    except msgspec.DecodeError as exc:
        raise ValueError(f"{path}: {exc}") from None
    body = raw.get("snapshot", raw) if isinstance(raw, dict) else raw
    if isinstance(body, dict):
        body.pop("hypernodes", None)  # the network tree is not used for one pod
    try:
        snapshot = strict_convert(body, Snapshot)  # read as `engine place --snapshot` reads it
        validate_snapshot(snapshot)
    except (ValueError, RequestError) as exc:
        raise ValueError(f"{path}: snapshot: {exc}") from None
    return snapshot.nodes


def _gates(text: str | None) -> dict[str, bool]:
    """--feature-gates, read as TOPOPLACE_FEATURE_GATES is (a gate topoplace does not read is noted, not refused)."""
    try:
        return parse_feature_gates(text)
    except ValueError as exc:
        raise ValueError(f"--feature-gates: {exc}") from None


def _the_pod(pods: list[PodRequest], node: str | None) -> PodRequest:
    import msgspec

    pod = pods[0]
    if node is not None:
        if pod.node_name and pod.node_name != node:
            raise ValueError(f"--node: the pod names node {pod.node_name!r} in spec.nodeName, not {node!r}")
        pod = msgspec.structs.replace(pod, node_name=node)  # kube's NodeName filter: every other node refused
    return pod


def answer_of(decision: Decision) -> dict[str, Any]:
    """The decision as the command prints it: every node, by name, with kube-scheduler's reasons."""
    import msgspec

    nodes: list[dict[str, Any]] = []
    if decision.node is not None:
        nodes.append({"name": decision.node, "fits": True, "reasons": [], "score": decision.score})
    for verdict in decision.alternatives:
        nodes.append(
            {
                "name": verdict.node,
                "fits": verdict.fits,
                "reasons": list(verdict.reasons) if not verdict.fits else [],
                "score": verdict.score if verdict.fits else None,
            }
        )
    nodes.sort(key=lambda n: n["name"])
    return {
        "node": decision.node,
        "devices": msgspec.to_builtins(decision.devices),
        "score": decision.score,
        "reason": decision.reason or None,
        "nodes": nodes,
        "victims": [],  # with preemption: the pods to evict (namespace/name) so that it runs on `node`
        "nominated": False,  # with preemption: `node` is where it is nominated once they are gone
    }


def place_on_cluster(args: argparse.Namespace) -> int:
    import msgspec

    from engine import Mode, RequestError, place
    from engine.decide.preempt.nominated import with_nominated
    from topoplace.cluster_objects.cluster import read_cluster, read_pods
    from topoplace.cluster_objects.priority import Priorities, read_preemptor
    from topoplace.commands.engine_extended import place_extended

    try:
        gates = _gates(args.feature_gates)
        if not args.pods:
            raise ValueError("--pods: give the pod to place (a file with a Pod object) with --cluster")
        cluster = read_cluster(args.cluster, _snapshot_nodes(args.snapshot))
        names = {n.name for n in cluster.snapshot.nodes}
        if args.node is not None and args.node not in names:
            raise ValueError(f"--node: no node {args.node!r} in the cluster ({len(names)} nodes)")
        pods = read_pods(args.pods, cluster.volumes, cluster.workloads)
        for line in cluster.notes:
            _note(line)
        for gate in sorted(set(gates) - set(dra_gates()) - set(kueue_gates())):
            _note(f"feature gate {gate}: not used by topoplace yet")
        if len(pods) > 1:
            return place_gang(cluster, pods, args, gates)
        pod = _the_pod(pods, args.node)
        preemptor = read_preemptor(args.pods, pod, Priorities(cluster.priority_classes))
        # Pods nominated to a node hold their room there from pods of lower or equal priority (kube's filters).
        snapshot = with_nominated(
            cluster.snapshot, cluster.nominated, preemptor.priority, f"{pod.namespace}/{pod.name}"
        )
        decision = place(snapshot, pod, Mode(args.mode), explain=True)
        placed, claims = _with_claims(decision, cluster, args.pods, gates)
        if decision.node is None:  # its extended resources may be DRA's to serve (KEP-5004)
            via_dra = place_extended(decision, snapshot, pod, cluster, args.pods, gates, Mode(args.mode))
            placed, claims = via_dra if via_dra is not None else (placed, claims)
        answer = answer_of(placed)
        if claims is not None:
            answer["claims"] = claims
        if decision.node is None and placed.node is None:
            answer = _preempted(answer, cluster, snapshot, preemptor, args)
        elif placed.node is None:  # only the claims failed: kube's DRA filter is unresolvable by eviction
            answer["reason"] = f"{answer['reason']} {_not_helpful(len(snapshot.nodes))}"
    except RequestError as exc:
        print(f"topoplace engine: {', '.join(args.pods)}: {exc}", file=sys.stderr)
        return BAD_INPUT
    except ValueError as exc:
        print(f"topoplace engine: {exc}", file=sys.stderr)
        return BAD_INPUT
    print(msgspec.json.format(msgspec.json.encode(answer).decode(), indent=2))
    return OK if answer["node"] is not None else NO_PLACE


def _preempted(
    answer: dict[str, Any], cluster: ClusterRead, snapshot: Snapshot, preemptor: Preemptor, args: argparse.Namespace
) -> dict[str, Any]:
    """The answer of a pod that fits nowhere as things are: nominated to a node once its victims are gone,
    or kube's message with preemption's own ("... preemption: 0/N nodes are available: ...")."""
    import msgspec

    from engine import Engine, Mode

    result = Engine().preempt(snapshot, preemptor, cluster.running, cluster.budgets, Mode(args.mode))
    if result.node is None or result.decision is None:
        return {**answer, "reason": f"{answer['reason']} {result.reason}"}
    return {
        **answer,
        "node": result.node,
        "devices": msgspec.to_builtins(result.decision.devices),
        "score": result.decision.score,
        "reason": None,
        "victims": [v.pod for v in result.victims],
        "nominated": True,
        "preemption": {
            "unschedulable": answer["reason"],
            "budget_violations": result.budget_violations,
            "victims": [msgspec.to_builtins(v) for v in result.victims],
            "candidates": [c.node for c in result.candidates],
            # a device pod: what counting devices alone (kube's reprieve) would evict there, and the link score
            "count_only": msgspec.to_builtins(result.count_only),
        },
    }


def _not_helpful(nodes: int) -> str:
    from engine.decide.kube.messages import fit_error_message
    from engine.decide.preempt.room import NOT_HELPFUL

    return "preemption: " + fit_error_message(nodes, [NOT_HELPFUL] * nodes)


def _with_claims(
    decision: Decision, cluster: ClusterRead, pod_paths: list[str], gates: dict[str, bool]
) -> tuple[Decision, list[dict[str, Any]] | None]:
    """The decision with the pod's ResourceClaims allocated (None: the pod names no claim)."""
    from engine.node.dra import CelPrograms
    from topoplace.cluster_objects.dra import pod_claims
    from topoplace.cluster_objects.dra_claims import decided_with, place_claims

    pod = pod_claims(pod_paths)
    if not pod.refs:
        return decision, None
    features = FeatureGates(gates=gates).dra_features()
    outcome = place_claims(decision, pod, cluster.dra, cluster.snapshot.nodes, CelPrograms(), features)
    return decided_with(decision, outcome)
