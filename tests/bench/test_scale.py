"""The scale benchmark's inputs and baselines: realistic nodes, the index against the reference loop,
the Volcano-style gang search against place_gang, the memory driver, and the figures they produce."""

from __future__ import annotations

import gc
import random
from collections import deque

import msgspec
import pytest

import engine
from bench import placer_memory, scale
from bench.decision_scale import ScaleSettings, _apply, describe, same_answer
from bench.decision_scale import measure as measure_decisions
from bench.gang_scale import (
    GangSettings,
    apply_gang,
    gang_request,
    hypernode_tree,
    scaled_tiers,
    volcano_gradient_search,
)
from bench.gang_scale import measure as measure_gang
from bench.placer_memory import drive
from bench.realistic_cluster import (
    ALLOCATABLE,
    CPU_PER_GPU,
    MACHINES,
    gpu_pod,
    random_pod,
    realistic_nodes,
    with_pod,
    without_pod,
)
from bench.reference_loop import place_reference
from engine import Decision, Engine, Snapshot
from engine.cluster.network import build_tree
from engine.decide.node_rules import PodRules
from engine.node.vendors import registry
from schemas.events import DeviceAssignment
from topoplace import gc_tuning


def test_realistic_nodes_are_each_unique_and_carry_what_the_node_rules_read():
    nodes = realistic_nodes(120, seed=3)
    assert len({n.name for n in nodes}) == 120
    assert len({n.labels["kubernetes.io/hostname"] for n in nodes}) == 120
    uuids = [d.uuid for n in nodes for d in n.devices]
    assert len(set(uuids)) == len(uuids) == 120 * 8
    assert {n.machine_type for n in nodes} == set(MACHINES)
    assert len({tuple((a.index, a.memory_mib) for a in n.allocations) for n in nodes}) > 60  # varied loads
    for n in nodes:
        assert n.allocatable is not None and {"cpu", "memory", "pods"} <= set(n.allocatable)
        assert n.requested["cpu"] and n.pods > 0 and n.taints


@pytest.mark.parametrize("machine", MACHINES)
def test_a_node_has_the_cpu_memory_and_pods_for_whatever_its_gpus_still_take(machine):
    # The node rules must never decide alone, or the reference loop (which lacks them) would answer otherwise.
    idle = next(n for n in realistic_nodes(30, seed=1, idle=1.0) if n.machine_type == machine)
    assert not idle.allocations
    assert PodRules(gpu_pod("eight", 8), registry.share_resources).failure(idle) is None
    node = idle
    for k in range(7):
        node = with_pod(node, Decision(node=node.name, devices=(DeviceAssignment(index=k),)), f"whole-{k}")
    assert PodRules(gpu_pod("one", 1), registry.share_resources).failure(node) is None
    share = DeviceAssignment(index=7, memory_mib=2_000, cores=10)
    for k in range(9):  # HAMi splits a GPU 10 ways: the tenth share must still fit by cpu, memory and pods
        node = with_pod(node, Decision(node=node.name, devices=(share,)), f"share-{k}")
    assert PodRules(gpu_pod("tenth", 1, shared=True), registry.share_resources).failure(node) is None
    cpu, _ = ALLOCATABLE[machine]
    assert int(node.requested["cpu"]) <= cpu


def _compare_stream(nodes: list, decisions: int, rng: random.Random, apply: bool) -> int:
    placer = Engine()  # a cold engine: the index's decisions and the reference loop's share it
    index = placer.new_index()
    for node in nodes:
        index.upsert(node)
    live: deque[tuple[str, str]] = deque()
    compared = 0
    for j in range(decisions):
        pod = random_pod(rng, f"pod-{j}")
        mine = placer.place_in(index, pod)
        reference = place_reference(placer, Snapshot(nodes=tuple(index.nodes())), pod, engine.Mode.DEFAULT)
        assert same_answer(mine, reference), describe(mine, reference)
        assert (mine.node is None) == (reference.node is None)
        compared += 1
        if apply:
            _apply(index, mine, pod, live)
    return compared


@pytest.mark.parametrize(("size", "seed"), [(50, 0), (150, 1), (500, 2)])
def test_the_index_decides_as_the_reference_loop_on_realistic_clusters(size, seed):
    rng = random.Random(seed)
    nodes = realistic_nodes(size, seed, idle=0.05)
    assert _compare_stream(nodes, 40, rng, apply=False) == 40


@pytest.mark.parametrize(("size", "seed"), [(60, 4), (300, 5)])
def test_the_index_decides_as_the_reference_loop_while_nodes_change(size, seed):
    # Each decision's pod is applied to its node and upserted; the oldest pod leaves: a placer's stream.
    rng = random.Random(seed)
    nodes = realistic_nodes(size, seed)
    assert _compare_stream(nodes, 80, rng, apply=True) == 80


def test_the_stream_fills_and_frees_nodes_as_the_placer_would():
    nodes = realistic_nodes(20, seed=0, idle=1.0)
    placer = Engine()
    index = placer.new_index()
    for node in nodes:
        index.upsert(node)
    pod = gpu_pod("p-0", 4)
    decision = placer.place_in(index, pod)
    assert decision.node is not None
    before = index.node(decision.node)
    after = with_pod(before, decision, "p-0")
    assert len(after.allocations) == 4 and int(after.requested["cpu"]) == int(before.requested["cpu"]) + 4 * CPU_PER_GPU
    assert after.pods == before.pods + 1
    assert without_pod(after, "p-0") == before


def test_decision_scale_measures_every_series_and_finds_no_difference():
    run = measure_decisions(ScaleSettings(nodes=80, warm=24, cold=2, reference_every=3, reference_cold=1))
    assert len(run.warm_ms) == 24 and len(run.cold_ms) == 2 and len(run.index_build_ms) == 2
    assert len(run.reference_ms) == 8 and len(run.reference_cold_ms) == 1
    assert run.compared == 9 and run.mismatches == ()
    assert run.classes > 1


def _small_tree(nodes: list):
    names = [n.name for n in nodes]
    return build_tree(hypernode_tree(names, scaled_tiers(len(names))), {n.name: n.labels for n in nodes}).tree


def test_the_hypernode_tree_has_four_tiers_of_consecutive_nodes():
    nodes = realistic_nodes(400, seed=0)
    tree = _small_tree(nodes)
    assert [len(tree.hypernodes_at(t)) for t in (1, 2, 3, 4)] == list(scaled_tiers(400)) == [300, 80, 18, 2]
    for hypernode in tree.hypernodes_at(4):
        start, end = tree.node_range(hypernode)
        assert end - start == 200


@pytest.mark.parametrize("pods", [3, 12, 40])
def test_the_volcano_style_search_lands_on_the_same_tier_as_place_gang(pods):
    nodes = realistic_nodes(400, seed=7, idle_by_block=((100, 0.15), (100, 0.6)))
    tree = _small_tree(nodes)
    placer = Engine()
    index = placer.new_index()
    for node in nodes:
        index.upsert(node)
    gang = gang_request("g", pods)
    decision = placer.place_gang(index, tree, gang)
    baseline = volcano_gradient_search(placer, index, tree, gang)
    assert decision.placed and baseline.hypernode is not None
    assert baseline.tier == decision.tier
    assert baseline.hypernodes_tried >= len(tree.hypernodes_at(1))
    held = apply_gang(index, decision)
    assert len(held) == pods and len({node for _, node in held}) == pods  # 8 GPUs each: one member a node


def test_the_volcano_style_search_reports_no_domain_when_the_gang_fits_nowhere():
    nodes = realistic_nodes(40, seed=0, idle=0.0, busy=0.9)
    placer = Engine()
    index = placer.new_index()
    for node in nodes:
        index.upsert(node)
    baseline = volcano_gradient_search(placer, index, _small_tree(nodes), gang_request("g", 8))
    assert baseline.hypernode is None and baseline.tier is None


def test_gang_scale_measures_the_engine_and_the_baseline_on_the_same_states():
    run = measure_gang(GangSettings(nodes=600, warm=3, cold=1, volcano=1, pods=16))
    assert len(run.warm_ms) == 3 and len(run.cold_ms) == 1 and len(run.volcano_ms) == 1
    assert run.placed == 3 and run.tiers == 4
    assert run.volcano_tiers == run.tiers_used[:1]


def test_the_memory_driver_leaves_every_node_indexed_and_no_pod_tracked():
    run = drive(30, 300, live=10, index_every=50)
    assert run.index_nodes == 30 and run.pods_known_end == 0 and run.deleted_remembered == 300
    assert run.peak_rss_mb >= run.rss_after_nodes_mb >= run.rss_after_imports_mb > 0


def test_scale_figures_carry_the_documented_names_and_baselines():
    decisions = measure_decisions(ScaleSettings(nodes=40, warm=8, cold=1, reference_every=2, reference_cold=1))
    gang = measure_gang(GangSettings(nodes=400, warm=2, cold=1, volcano=1, pods=4))
    memory = drive(20, 100, live=10)
    results = scale.ScaleResults(decisions=(decisions,), gang=gang, memory=memory)
    by_name = {f.name: f for f in scale.figures(results)}
    assert set(by_name) == {"engine.decision_p99_ms.40", "engine.gang_p99_ms.400", "placer.rss_mb.20"}
    assert {"cold", "reference", "reference cold"} <= set(by_name["engine.decision_p99_ms.40"].baselines)
    assert {"volcano gradient search", "cold", "tree build"} <= set(by_name["engine.gang_p99_ms.400"].baselines)
    assert by_name["placer.rss_mb.20"].value == memory.peak_rss_mb
    said = scale.notes(results)
    assert len(said) == 2 and all(" its goal of " in n for n in said)  # no goal at 40 nodes
    for warm, verdict in ((9.0, "NOT within its goal of 1 ("), (0.5, ": within its goal of 1 (")):
        run = msgspec.structs.replace(decisions, nodes=1_000, warm_ms=(warm,) * 8)
        (note,) = scale.notes(scale.ScaleResults(decisions=(run,)))
        assert note.startswith(f"engine.decision_p99_ms.1000 = {warm:g} ms") and verdict in note and "reference" in note
    text = scale.markdown(results)
    assert "Volcano-style gradient search" in text and "Placer memory" in text
    missing = scale.figures(scale.ScaleResults(memory_error="CalledProcessError: exit 1"))
    assert [(f.name, f.value) for f in missing] == [("placer.rss_mb.10000", None)]


def test_the_memory_figure_is_the_child_s_own_peak_not_its_parent_s():
    # Linux keeps ru_maxrss across exec: a child of a large process would report the parent's size.
    ballast = bytearray(300 * 1024 * 1024)
    ballast[::4096] = b"\x01" * len(ballast[::4096])  # touch every page: resident in this process
    run = placer_memory.measure(20, 100)
    assert run.index_nodes == 20 and run.pods_known_end == 0
    assert run.peak_rss_mb < 200 < len(ballast) / (1024 * 1024)


def test_the_gang_p999_is_read_over_fifty_gangs_or_more():
    run = measure_gang(GangSettings(nodes=400, warm=2, cold=1, volcano=0, pods=4))
    assert run.p999("warm_ms") is None  # two gangs: a p99.9 would be their maximum
    many = msgspec.structs.replace(run, warm_ms=tuple(float(i) for i in range(100)))
    assert many.p999("warm_ms") == pytest.approx(98.901)


def test_scale_decides_with_the_placer_collector_settings_and_puts_the_defaults_back(monkeypatch):
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    monkeypatch.setattr(scale, "freeze_long_lived", lambda: seen.append(gc.get_threshold()))
    profile = scale.ScaleProfile(
        decisions=(ScaleSettings(nodes=40, warm=4, cold=1, reference_every=2, reference_cold=0),),
        gang=GangSettings(nodes=400, warm=2, cold=1, volcano=0, pods=4),
        memory=None,
    )
    scale.run(profile, lambda _: None)
    placer = (gc_tuning.GEN0_THRESHOLD, gc_tuning.GEN1_THRESHOLD, gc_tuning.GEN2_THRESHOLD)
    assert seen == [placer, placer]  # once the decision index is built, once the gang index is
    assert gc.get_threshold() == before
