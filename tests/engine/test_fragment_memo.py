"""The fragmentation measure kept per node shape (engine/node/fragment_memo.py): the same figures and
the same placements as counting every node afresh, and counted once per shape.

The reference is the engine with its memo off: the policy then calls `fragmentation` itself for every
node and choice, as it did before the figures were kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np
import pytest
from engine_builders import gpu, node, pod
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.node.fragmentation as measure
from bench.cluster import ClusterState, Placement
from bench.fragmentation import PodClass
from bench.topoplace_trace import EngineTracePolicy
from bench.trace import load_nodes, load_pods
from bench.trace_replay import SIMULATOR, replay
from engine import Engine, Limits, NodeState
from engine.cluster.index import DeviceClasses, NodeReads
from engine.core.memo import Memo
from engine.core.model import WorkloadClass
from engine.node import fragment_memo
from engine.node.answer import NodeAnswers
from engine.node.fragment_memo import FragmentMemo, WorkloadFigures
from engine.node.fragmentation import FreeShare, fragmentation

TRACE = Path(__file__).resolve().parents[2] / "bench" / "data" / "alibaba-gpu-v2023"
MODELS = ("A100", "T4", "V100M16")

workload_classes = st.builds(
    WorkloadClass,
    gpus=st.integers(0, 3),
    milli=st.sampled_from((100, 250, 500, 700, 1000)),
    weight=st.floats(0.01, 5.0, allow_nan=False),
    models=st.sampled_from(((), ("T4",), ("A100", "V100"))),
    cpu_milli=st.sampled_from((0, 1000, 4000, 4000, 12000, 32000)),
)
free_shares = st.builds(
    FreeShare, milli=st.sampled_from((0, 100, 250, 300, 500, 1000)), idle=st.booleans(), model=st.sampled_from(MODELS)
)
node_queries = st.tuples(
    st.lists(free_shares, min_size=0, max_size=8),
    st.one_of(st.none(), st.integers(-2000, 40000)),
)


@settings(max_examples=200, deadline=None)
@given(workload=st.lists(workload_classes, min_size=1, max_size=6), queries=st.lists(node_queries, max_size=12))
def test_the_kept_measure_is_the_measure_counted_afresh(
    workload: list[WorkloadClass], queries: list[tuple[list[FreeShare], int | None]]
) -> None:
    # One engine's tables across many nodes, their devices in any order and their CPU anywhere: a node
    # whose shape was met before (perhaps with other CPU in the same bucket) reads the kept figure.
    kept = FragmentMemo(Memo())
    mix = tuple(workload)
    figures = kept.figures(mix)
    for shares, cpu_free in queries:
        for order in (shares, shares[::-1]):
            assert kept.fragmentation(order, figures, cpu_free) == fragmentation(order, mix, cpu_free)
    assert kept.figures(mix) is figures
    assert kept.figures(tuple(workload)) is figures  # an equal workload, another tuple: the same figures


def cpu_node(name: str, gpus: int, cores: int, used_cores: int) -> NodeState:
    allocatable = {"cpu": str(cores), "pods": "110", "nvidia.com/gpu": str(10 * gpus)}
    state = node(name, [gpu(i) for i in range(gpus)])
    return msgspec.structs.replace(state, allocatable=allocatable, requested={"cpu": f"{used_cores}"})


def test_nodes_of_one_shape_are_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Twelve idle 8-GPU nodes whose free CPU differs (24..35 cores) but turns away the same classes
    # (none asks more than 16 cores): one shape before the pod, and one per GPU the pod can take after
    # it (all alike once sorted). Counting every node afresh would measure each node again.
    counted: list[str] = []  # one entry per F counted: "shape" from the kept tables, "node" afresh
    kept_measure = WorkloadFigures.measure
    fresh_measure = measure.fragmentation

    def counting_shape(*args: object) -> float:
        counted.append("shape")
        return kept_measure(*args)  # type: ignore[arg-type]

    def counting_node(*args: object) -> float:
        counted.append("node")
        return fresh_measure(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(WorkloadFigures, "measure", counting_shape)
    monkeypatch.setattr(fragment_memo, "fragmentation", counting_node)
    workload = (
        WorkloadClass(gpus=1, milli=1000, weight=0.5, cpu_milli=8000),
        WorkloadClass(gpus=1, milli=500, weight=0.3, cpu_milli=4000),
        WorkloadClass(gpus=0, weight=0.2, cpu_milli=16000),
    )
    nodes = tuple(cpu_node(f"n{i:02d}", 8, 64, 64 - 24 - i) for i in range(12))
    share = pod(1, gpumem="40960", gpucores="50", node_policy="fragmentation")
    share = msgspec.structs.replace(share, requests={**share.requests, "cpu": "2"})

    def decide(engine: Engine) -> tuple[str | None, tuple[object, ...]]:
        index = engine.new_index(cpu=True)
        for state in nodes:
            index.upsert(state)
        decision = engine.place_in(index, share, workload=workload)
        return decision.node, decision.devices

    placed = decide(Engine())
    # Before the pod and after it (one bucket: 22..35 cores free after the pod's 2), one shape each.
    assert counted == ["shape", "shape"]
    counted.clear()
    assert decide(Engine(limits=Limits(caches=False))) == placed
    assert counted.count("node") > 2 * 12  # afresh: every node before and after, every GPU (the reference)
    # The exact CPU still ranks the nodes (the tie term): a pod light on CPU (4 cores per GPU against the
    # workload's 8) goes where least is spare, n00.
    assert placed[0] == "n00"


class RecordingFactory:
    """EngineTracePolicy over a given engine, recording every placement it makes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.placements: list[Placement | None] = []

    def __call__(self, state: ClusterState, classes: Sequence[PodClass]) -> EngineTracePolicy:
        policy = EngineTracePolicy(state, classes, engine=self.engine)
        placements = self.placements
        choose = policy.choose

        def recorded(*args: object) -> Placement | None:
            placement = choose(*args)  # type: ignore[arg-type]
            placements.append(placement)
            return placement

        policy.choose = recorded  # type: ignore[method-assign]
        return policy


@pytest.mark.parametrize("seed", [0, 1])
def test_a_trace_slice_is_placed_alike_with_the_kept_measure_and_without_it(seed: int) -> None:
    # The Alibaba trace's first 48 GPU nodes, its pods in the seed's order until the demand reaches
    # their capacity: every placement (node and GPUs) the same, and so the unallocated figure.
    nodes = [n for n in load_nodes(TRACE / "openb_node_list_gpu_node.csv") if n.gpus > 0][:48]
    pods = load_pods(TRACE / "openb_pod_list_default.csv")
    classes = SIMULATOR.classes(pods)
    fresh = RecordingFactory(Engine(limits=Limits(caches=False)))
    kept = RecordingFactory(Engine())
    expected = replay(nodes, pods, fresh, classes, seed=seed, protocol=SIMULATOR)
    result = replay(nodes, pods, kept, classes, seed=seed, protocol=SIMULATOR)
    assert kept.placements == fresh.placements
    assert sum(p is not None for p in kept.placements) > 150, "the slice should place many pods"
    assert result.unallocated_pct == expected.unallocated_pct
    assert np.isfinite(result.unallocated_pct)


def test_nodes_that_differ_only_in_cpu_share_one_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under a workload that names CPU, each node's CPU is part of its class. Ten 2-GPU nodes alike but
    # for their CPU cannot take a 4-GPU pod: the vendor refuses one and the others share the refusal
    # (vendors never read CPU); the decision and its reasons are the ones counted afresh.
    evaluated: list[int] = []
    evaluate = NodeAnswers.evaluate

    def counting(*args: object) -> object:
        evaluated.append(1)
        return evaluate(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(NodeAnswers, "evaluate", counting)
    workload = (WorkloadClass(gpus=1, milli=1000, cpu_milli=4000),)
    nodes = [cpu_node(f"n{i}", 2, 64, i) for i in range(10)] + [cpu_node("wide", 4, 64, 0)]
    four = pod(4, node_policy="fragmentation")
    four = msgspec.structs.replace(four, requests={**four.requests, "cpu": "1"})

    def decide(engine: Engine) -> bytes:
        index = engine.new_index(cpu=True)
        for state in nodes:
            index.upsert(state)
        first = engine.place_in(index, four, workload=workload)
        index.remove("wide")
        second = engine.place_in(index, four, workload=workload)
        return msgspec.json.encode((first, second))

    kept = decide(Engine())
    assert len(evaluated) == 2  # one 2-GPU node and the 4-GPU one
    assert kept == decide(Engine(limits=Limits(caches=False)))
    assert b'"node":"wide"' in kept and b'"node":null' in kept


def test_a_class_state_is_built_once_for_every_request_shape_that_meets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each placement under a CPU-reading workload makes a new class that every request shape then asks
    # the vendor about: the class's state (nameless, without UUIDs and pod uids) is built once for all.
    built: list[int] = []
    state_of = DeviceClasses.state_of

    def counting(self: DeviceClasses, state: NodeState, reads: NodeReads) -> NodeState:
        built.append(1)
        return state_of(self, state, reads)

    monkeypatch.setattr(DeviceClasses, "state_of", counting)
    workload = (WorkloadClass(gpus=1, milli=1000, cpu_milli=4000),)
    engine = Engine()
    index = engine.new_index(cpu=True)
    index.upsert(cpu_node("only", 4, 64, 0))
    for gpus in (1, 2, 3):
        request = pod(gpus, node_policy="fragmentation")
        request = msgspec.structs.replace(request, requests={**request.requests, "cpu": "1"})
        assert engine.place_in(index, request, workload=workload).node == "only"
    assert len(built) == 1
