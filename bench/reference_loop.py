"""The straightforward per-node loop: every node asked, sorted, every loser explained.

This was the engine's decision loop before the cluster index (engine/decide/pod.py).
It stays as the reference the index must agree with, decision for decision
(tests/engine/test_index_equivalence.py), and as the baseline the benchmark
times the index against. It knows only readiness and cordon of the node-level
rules, as it did then.
"""

from __future__ import annotations

from engine.core.model import Decision, Mode, NodeVerdict, PodRequest, Snapshot
from engine.decide.engine import Engine
from engine.decide.node_rules import pod_cpu_milli
from engine.node.answer import (
    NodeFit,
    NodeMiss,
    check_unique,
    prefixed,
)
from engine.node.explain import loser_reason, unschedulable_summary
from engine.node.fragmentation import reads_cpu
from engine.node.vendor import RequestError


def place_reference(engine: Engine, snapshot: Snapshot, request: PodRequest, mode: Mode) -> Decision:
    """Every node of `snapshot` asked by `engine`'s node answers, sorted by (-score, name)."""
    claimed = engine.vendors.claim(request)
    if claimed is None:
        known = ", ".join(p.name for p in engine.vendors.plugins)
        raise RequestError("requests", f"asks for no device resource of a known vendor ({known})")
    plugin, device_request = claimed
    cpu = pod_cpu_milli(request) if reads_cpu(snapshot.workload) else None
    device_request = engine.vendors.policies.with_workload(device_request, snapshot.workload, mode, cpu)
    nodes = sorted(snapshot.nodes, key=lambda n: n.name)
    check_unique(nodes)
    # Nameless answers, shared by identical nodes; each node's name goes back in when reported.
    answers = engine.node_answers.outcomes(plugin, device_request, nodes, mode)
    results = zip([n.name for n in nodes], answers, strict=True)
    fits: list[tuple[str, NodeFit]] = []
    misses: list[tuple[str, NodeMiss]] = []
    warnings: list[str] = []
    for name, result in results:
        if isinstance(result, NodeFit):
            fits.append((name, result))
        else:
            misses.append((name, result))
        if result.warnings:
            warnings.extend(prefixed(name, result.warnings))
    fits.sort(key=lambda f: (-f[1].score.score, f[0]))
    considered = sum(f.choice.considered for _, f in fits)
    miss_verdicts = tuple(NodeVerdict(node=name, fits=False, reason=m.unfit.reason) for name, m in misses)
    if not fits:
        return Decision(
            node=None,
            reason=unschedulable_summary(len(nodes), [m.unfit.summary for _, m in misses]),
            alternatives=miss_verdicts,
            candidates_considered=considered,
            warnings=tuple(warnings),
        )
    winner_name, winner = fits[0]
    # Identical nodes share one answer object: its loser reason and devices are worked out once.
    shared: dict[int, tuple[tuple[int, ...], str]] = {}
    losers: list[NodeVerdict] = []
    for name, fit in fits[1:]:
        told = shared.get(id(fit))
        if told is None:
            told = (fit.choice.devices, loser_reason(winner_name, winner.score, fit.score))
            shared[id(fit)] = told
        losers.append(NodeVerdict(node=name, fits=True, score=fit.score.score, devices=told[0], reason=told[1]))
    parts = dict(winner.choice.parts)
    parts.update(winner.score.parts)
    return Decision(
        node=winner_name,
        devices=winner.choice.assignments,
        score=winner.score.score,
        score_parts=parts,
        alternatives=tuple(losers) + miss_verdicts,
        candidates_considered=considered,
        warnings=tuple(warnings),
        qos=device_request.qos,
        app_class=device_request.app_class,
    )
