"""`topoplace engine place --cluster FILE ... --pods FILE`: one pod placed on a cluster given as Kubernetes objects.

The answer (JSON):

    {"node": name | null, "devices": [...], "score": number, "reason": text | null,
     "nodes": [{"name", "fits", "reasons": [kube-scheduler's reasons], "score": number | null}, ...]}

with every node listed, by name. Notes (kinds not used yet, devices read without their seal, feature
gates) go to stderr, one line each. Exit codes: 0 placed, 1 no place, 2 bad input (one line naming the
file and the field).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from topoplace.commands.exit_codes import BAD_INPUT, NO_PLACE, OK

if TYPE_CHECKING:
    from engine import Decision, NodeState, PodRequest

# The labels / annotations that make several pods one gang (Volcano's PodGroup, Kueue's pod group).
GANG_KEYS = ("scheduling.k8s.io/group-name", "kueue.x-k8s.io/pod-group-name")


def parse_feature_gates(text: str | None) -> dict[str, bool]:
    """`Name=true,Other=false` as kube-scheduler's --feature-gates reads it; ValueError names the bad part."""
    gates: dict[str, bool] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, value = part.strip().partition("=")
        if not sep or not name or value.lower() not in ("true", "false"):
            raise ValueError(f"--feature-gates: expected Name=true or Name=false, got {part.strip()!r}")
        gates[name] = value.lower() == "true"
    return gates


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
        snapshot = msgspec.convert(body, type=Snapshot)
        validate_snapshot(snapshot)
    except (msgspec.ValidationError, RequestError) as exc:
        raise ValueError(f"{path}: snapshot: {exc}") from None
    return snapshot.nodes


def _the_pod(pods: list[PodRequest], node: str | None) -> PodRequest:
    import msgspec

    if len(pods) > 1:
        groups = {p.annotations.get(GANG_KEYS[0]) or p.labels.get(GANG_KEYS[1]) for p in pods}
        what = "a gang" if len(groups) == 1 and None not in groups else "several pods"
        raise ValueError(
            f"--pods: {len(pods)} pods given ({what}): placing more than one Pod object is not supported yet;"
            " give one Pod (a gang: `engine place --snapshot` with `gang`)"
        )
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
    }


def place_on_cluster(args: argparse.Namespace) -> int:
    import msgspec

    from engine import Mode, RequestError, place
    from topoplace.cluster_objects.cluster import read_cluster, read_pods

    try:
        gates = parse_feature_gates(args.feature_gates)
        if not args.pods:
            raise ValueError("--pods: give the pod to place (a file with a Pod object) with --cluster")
        cluster = read_cluster(args.cluster, _snapshot_nodes(args.snapshot))
        names = {n.name for n in cluster.snapshot.nodes}
        if args.node is not None and args.node not in names:
            raise ValueError(f"--node: no node {args.node!r} in the cluster ({len(names)} nodes)")
        pod = _the_pod(read_pods(args.pods), args.node)
        for line in cluster.notes:
            _note(line)
        for gate in sorted(gates):
            _note(f"feature gate {gate}: not used by topoplace yet")
        decision = place(cluster.snapshot, pod, Mode(args.mode), explain=True)
    except RequestError as exc:
        print(f"topoplace engine: {', '.join(args.pods)}: {exc}", file=sys.stderr)
        return BAD_INPUT
    except ValueError as exc:
        print(f"topoplace engine: {exc}", file=sys.stderr)
        return BAD_INPUT
    print(msgspec.json.format(msgspec.json.encode(answer_of(decision)).decode(), indent=2))
    return OK if decision.node is not None else NO_PLACE
