"""One placement decision at 1,000 and 10,000 realistic nodes: the cluster index, cold and warm, beside
the reference per-node loop on the same inputs.

- warm: one index kept for a stream of decisions (after one untimed decision per pod
  shape, so that every device class was answered once); after each decision its pod is
  applied to the chosen node and the node upserted (as the placer's view does),
  and the oldest pod of the stream leaves (its node upserted too), so the load
  stays level and every decision meets changed nodes. Only `place_in` is timed.
- cold: first sight of every node state: the engine's memo tables emptied
  (a new `Engine`) and a new index built (its build timed apart), then one
  `place_in`.
- reference: `reference_loop.place_reference` on a snapshot of the same state as
  a warm decision (every `reference_every`-th one at 10,000 nodes, where it is
  slow), its own memo tables kept between calls; also once cold per cold decision.
  Each reference answer is compared with the index's (node, devices, score).
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Sequence

import msgspec
import numpy as np

from bench.realistic_cluster import gpu_pod, random_pod, realistic_nodes, with_pod, without_pod
from bench.reference_loop import place_reference
from engine import ClusterIndex, Decision, Engine, Mode, NodeState, PodRequest, Snapshot


class ScaleSettings(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    warm: int  # decisions timed in the warm stream
    cold: int  # cold decisions (each on a freshly built index)
    reference_every: int = 1  # the reference runs on every n-th warm decision
    reference_cold: int = 0  # cold reference decisions
    seed: int = 0


class DecisionScaleRun(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    classes: int  # device classes in the index at the start
    warm_ms: tuple[float, ...]
    cold_ms: tuple[float, ...]
    index_build_ms: tuple[float, ...]  # building the index of the whole cluster, cold
    reference_ms: tuple[float, ...]
    reference_cold_ms: tuple[float, ...]
    compared: int  # reference answers compared with the index's
    mismatches: tuple[str, ...]  # the first few differences, in words
    unplaced: int  # warm decisions that found no node

    def p99(self, which: str) -> float | None:
        values: tuple[float, ...] = getattr(self, which)
        return float(np.percentile(values, 99)) if values else None

    def p50(self, which: str) -> float | None:
        values: tuple[float, ...] = getattr(self, which)
        return float(np.percentile(values, 50)) if values else None


def same_answer(a: Decision, b: Decision) -> bool:
    return a.node == b.node and a.devices == b.devices and round(a.score, 6) == round(b.score, 6)


def describe(a: Decision, b: Decision) -> str:
    def short(d: Decision) -> str:
        return f"{d.node} {[x.index for x in d.devices]} {round(d.score, 6)}"

    return f"index {short(a)} vs reference {short(b)}"


def elapsed_ms(started: float) -> float:
    return 1000.0 * (time.perf_counter() - started)


def cold_index(nodes: Sequence[NodeState]) -> tuple[Engine, ClusterIndex, float]:
    """A fresh engine and its index of `nodes`, and the milliseconds the index took to build (a cold start)."""
    engine = Engine()
    started = time.perf_counter()
    index = engine.new_index()
    for node in nodes:
        index.upsert(node)
    return engine, index, elapsed_ms(started)


def _nothing() -> None:
    return None


def measure(
    settings: ScaleSettings, mode: Mode = Mode.DEFAULT, *, settle: Callable[[], None] = _nothing
) -> DecisionScaleRun:
    """`settle`: called once the warm index is built and answered once per pod shape (the bench passes the
    placer's `freeze_long_lived`, as the placer calls it once its view is built)."""
    rng = random.Random(settings.seed)
    nodes = realistic_nodes(settings.nodes, settings.seed)
    pods = [random_pod(rng, f"stream-{j:06d}") for j in range(settings.warm + settings.cold + 8)]
    mismatches: list[str] = []
    compared = 0

    def check(index_decision: Decision, reference: Decision) -> None:
        nonlocal compared
        compared += 1
        if not same_answer(index_decision, reference) and len(mismatches) < 5:
            mismatches.append(describe(index_decision, reference))

    # Cold: a fresh engine for every decision, on the initial cluster.
    cold_ms: list[float] = []
    build_ms: list[float] = []
    reference_cold_ms: list[float] = []
    classes = 0
    for j in range(settings.cold):
        pod = pods[settings.warm + j]
        placer, index, built = cold_index(nodes)
        build_ms.append(built)
        classes = index.class_count()
        started = time.perf_counter()
        decision = placer.place_in(index, pod, mode)
        cold_ms.append(elapsed_ms(started))
        if j < settings.reference_cold:
            snapshot = Snapshot(nodes=tuple(nodes))
            reference_engine = Engine()
            started = time.perf_counter()
            reference = place_reference(reference_engine, snapshot, pod, mode)
            reference_cold_ms.append(elapsed_ms(started))
            check(decision, reference)

    # Warm: one index, a stream of decisions, each applied to its node.
    placer = Engine()
    index = placer.new_index()
    for node in nodes:
        index.upsert(node)
    classes = classes or index.class_count()
    live: deque[tuple[str, str]] = deque()  # (pod uid, node) of the stream's pods, oldest first
    for j, shape in enumerate(WARM_UP):  # one untimed decision per pod shape: the classes answered once
        pod = gpu_pod(f"warm-up-{j}", shape, shared=shape == 0)
        _apply(index, placer.place_in(index, pod, mode), pod, live)
    settle()
    warm_ms: list[float] = []
    reference_ms: list[float] = []
    unplaced = 0
    for j in range(settings.warm):
        pod = pods[j]
        started = time.perf_counter()
        decision = placer.place_in(index, pod, mode)
        warm_ms.append(elapsed_ms(started))
        if j % settings.reference_every == 0:
            snapshot = Snapshot(nodes=tuple(index.nodes()))
            started = time.perf_counter()
            reference = place_reference(placer, snapshot, pod, mode)
            reference_ms.append(elapsed_ms(started))
            check(decision, reference)
        _apply(index, decision, pod, live)
        unplaced += decision.node is None
    return DecisionScaleRun(
        nodes=settings.nodes,
        classes=classes,
        warm_ms=tuple(warm_ms),
        cold_ms=tuple(cold_ms),
        index_build_ms=tuple(build_ms),
        reference_ms=tuple(reference_ms),
        reference_cold_ms=tuple(reference_cold_ms),
        compared=compared,
        mismatches=tuple(mismatches),
        unplaced=unplaced,
    )


WARM_UP = (1, 2, 4, 8, 0)  # GPUs of the warm-up pods (0: a memory share)
STREAM_WINDOW = 32  # pods of the stream alive at once: the oldest leaves when a new one arrives


def _apply(index: ClusterIndex, decision: Decision, pod: PodRequest, live: deque[tuple[str, str]]) -> None:
    if decision.node is not None:
        index.upsert(with_pod(index.node(decision.node), decision, pod.uid))
        live.append((pod.uid, decision.node))
    if len(live) > STREAM_WINDOW:
        uid, name = live.popleft()
        index.upsert(without_pod(index.node(name), uid))
