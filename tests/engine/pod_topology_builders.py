"""Nodes with running pods, and pods with pod (anti-)affinity and spread constraints, for the engine's tests."""

from __future__ import annotations

from typing import Any

import msgspec

from engine import Decision, Engine, Mode, NodeState, PodRequest, Snapshot
from engine.core.model import Namespace, PlacedPod
from schemas.kube import PodAffinities, TopologySpreadConstraint

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(key: str = HOSTNAME, *, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A podAffinityTerm selecting `labels` (matchLabels) in `key`'s domains."""
    body: dict[str, Any] = {"topologyKey": key, **extra}
    if labels is not None:
        body["labelSelector"] = {"matchLabels": labels}
    return body


def affinities(
    *,
    required: tuple[dict[str, Any], ...] = (),
    anti: tuple[dict[str, Any], ...] = (),
    preferred: tuple[tuple[int, dict[str, Any]], ...] = (),
    preferred_anti: tuple[tuple[int, dict[str, Any]], ...] = (),
) -> PodAffinities:
    def side(req: tuple[dict[str, Any], ...], pref: tuple[tuple[int, dict[str, Any]], ...]) -> dict[str, Any]:
        return {
            "requiredDuringSchedulingIgnoredDuringExecution": list(req),
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "podAffinityTerm": t} for w, t in pref],
        }

    raw = {"podAffinity": side(required, preferred), "podAntiAffinity": side(anti, preferred_anti)}
    return msgspec.convert(raw, PodAffinities)


def spread(key: str, max_skew: int = 1, *, hard: bool = True, labels: dict[str, str] | None = None,
           **extra: Any) -> TopologySpreadConstraint:  # fmt: skip
    body: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        **extra,
    }
    if labels is not None:
        body["labelSelector"] = {"matchLabels": labels}
    return msgspec.convert(body, TopologySpreadConstraint)


def running(uid: str, *, namespace: str = "default", affinity: PodAffinities | None = None,
            **labels: str) -> PlacedPod:  # fmt: skip
    return PlacedPod(uid=uid, namespace=namespace, labels=dict(labels), affinities=affinity)


def kube_node(name: str, zone: str | None = None, *pods: PlacedPod, hostname: bool = True, **fields: Any) -> NodeState:
    labels = {HOSTNAME: name} if hostname else {}
    if zone is not None:
        labels[ZONE] = zone
    labels.update(fields.pop("labels", {}))
    return NodeState(name=name, labels=labels, running=tuple(pods), **fields)


def incoming(*, namespace: str = "default", affinity: PodAffinities | None = None,
             constraints: tuple[TopologySpreadConstraint, ...] = (), **fields: Any) -> PodRequest:  # fmt: skip
    return PodRequest(
        uid="incoming",
        namespace=namespace,
        name="incoming",
        affinities=affinity,
        topology_spread_constraints=constraints,
        **fields,
    )


def snapshot(*nodes: NodeState, namespaces: dict[str, dict[str, str]] | None = None) -> Snapshot:
    spaces = tuple(Namespace(name=n, labels=labels) for n, labels in (namespaces or {}).items())
    return Snapshot(nodes=nodes, namespaces=spaces)


def decide(snap: Snapshot, pod: PodRequest, engine: Engine | None = None) -> Decision:
    return (engine or Engine()).place(snap, pod, Mode.DEFAULT, explain=True)


def verdicts(decision: Decision) -> dict[str, str | float]:
    """Each node: its one reason when it cannot take the pod, else its score."""
    out: dict[str, str | float] = {}
    if decision.node is not None:
        out[decision.node] = decision.score
    for verdict in decision.alternatives:
        out[verdict.node] = verdict.score if verdict.fits else "; ".join(verdict.reasons)
    return out
