"""kube-scheduler's per-node scores: NodeResourcesFit's strategies, BalancedAllocation, ImageLocality.

The tables are kube-scheduler's own cases (pkg/scheduler/framework/plugins/noderesources/*_test.go,
imagelocality/image_locality_test.go), the scores exactly as it computes them: first each plugin alone,
then through the engine, where a pod no device vendor claims gets Fit + BalancedAllocation + ImageLocality
(weights 1 each) and a GPU pod its device score alone.
"""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import gpu, node
from hypothesis import given, settings
from hypothesis import strategies as st
from pod_topology_builders import decide, verdicts

from engine import Engine, Limits, NodeState, PodRequest, Snapshot
from engine.core.limits import ResourceWeight, ScoringStrategy, ShapePoint
from engine.core.model import NodeImage
from engine.decide.kube.image_locality import (
    MIB,
    ImageLocality,
    image_priority,
    image_sizes,
    nodes_holding,
    normalized_image_name,
)
from engine.decide.kube.resource_scores import balanced_score, broken_linear, fit_score, nonzero_request
from engine.decide.kube.resources import parse_requests

LEAST = ScoringStrategy()
MOST = ScoringStrategy(type="MostAllocated")
RATIO = ScoringStrategy(type="RequestedToCapacityRatio")
EXTENDED = "intel.com/foo"


def amounts(**quantities: str) -> dict[str, int]:
    return parse_requests({k.replace("_", "/"): v for k, v in quantities.items()}, "test")


def fit(strategy: ScoringStrategy, pod: dict[str, int], allocatable: dict[str, int], requested: dict[str, int]) -> int:
    return fit_score(strategy, nonzero_request(pod), allocatable, requested, requested)


# (pod request, node allocatable, node requested, LeastAllocated, MostAllocated, RequestedToCapacityRatio)
FIT_TABLE = [
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "4000", "memory": "10000"}, {}, 37, 62, 63,
                 id="nothing scheduled, resources requested, node1"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "6000", "memory": "10000"}, {}, 50, 50, 50,
                 id="nothing scheduled, resources requested, node2"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "10000", "memory": "20000"},
                 {"cpu": "3000", "memory": "0"}, 57, 42, 43, id="pods scheduled with resources, node1"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "10000", "memory": "20000"},
                 {"cpu": "3000", "memory": "5000"}, 45, 55, 55, id="pods scheduled with resources, node2"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "10000", "memory": "50000"},
                 {"cpu": "3000", "memory": "5000"}, 60, 40, 40, id="differently sized nodes"),
    pytest.param({"cpu": "3000", "memory": "0"}, {"cpu": "4000", "memory": "10000"},
                 {"cpu": "3000", "memory": "5000"}, 25, 75, 75, id="requested resources exceed node capacity"),
    pytest.param({}, {}, {"cpu": "3000"}, 0, 0, 0, id="zero node resources"),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "allocatable", "requested", "least", "most", "ratio"), FIT_TABLE)
def test_node_resources_fit_strategies_score_as_kube(
    pod: dict[str, str], allocatable: dict[str, str], requested: dict[str, str], least: int, most: int, ratio: int
) -> None:
    args = (amounts(**pod), amounts(**allocatable), amounts(**requested))
    assert (fit(LEAST, *args), fit(MOST, *args), fit(RATIO, *args)) == (least, most, ratio)


def test_least_allocated_weighs_resources_and_reads_extended_ones_only_when_asked() -> None:
    weighted = ScoringStrategy(resources=(ResourceWeight(name="memory", weight=2), ResourceWeight(name="cpu")))
    pod = amounts(cpu="3000", memory="5000")
    assert fit(weighted, pod, amounts(cpu="4000", memory="10000"), {}) == 41  # (25 * 1 + 50 * 2) / 3
    assert fit(weighted, pod, amounts(cpu="6000", memory="10000"), {}) == 50
    with_foo = ScoringStrategy(resources=(*LEAST.resources, ResourceWeight(name=EXTENDED)))
    pod = amounts(cpu="3000", memory="5000")
    big = amounts(cpu="6000", memory="10000", **{"intel.com_foo": "4"})
    assert fit(with_foo, pod, amounts(cpu="6000", memory="10000"), {}) == 50  # bypassed: not asked
    assert fit(with_foo, pod, big, {}) == 50
    asking = amounts(cpu="3000", memory="5000", **{"intel.com_foo": "2"})
    assert fit(with_foo, asking, big, {}) == 50  # (50 + 50 + 50) / 3
    bigger = amounts(cpu="6000", memory="10000", **{"intel.com_foo": "10"})
    assert fit(with_foo, asking, bigger, {}) == 60  # (50 + 50 + 80) / 3


def test_a_pod_asking_nothing_counts_kubes_defaults() -> None:
    # 100m cpu and 200 MiB: on a node of 1 cpu and 1 GiB, cpu 90 and memory (1024 - 200) * 100 / 1024 = 80
    assert fit(LEAST, {}, amounts(cpu="1", memory="1Gi"), {}) == 85
    assert nonzero_request(amounts(cpu="0")) == {"cpu": 0, "memory": 200 * MIB * 1000}


def test_requested_to_capacity_ratio_is_kubes_broken_linear_function() -> None:
    shape = (
        ShapePoint(utilization=10, score=5),
        ShapePoint(utilization=50, score=7),
        ShapePoint(utilization=80, score=2),
    )
    # below the first point: its score; between points: Go's integer arithmetic, truncated towards zero
    assert [broken_linear(shape, p) for p in (0, 10, 30, 50, 60, 80, 90)] == [50, 50, 60, 70, 54, 20, 20]


def test_a_shape_must_rise_and_weights_stay_in_kubes_bounds() -> None:
    with pytest.raises(msgspec.ValidationError, match="increase"):
        msgspec.convert({"type": "RequestedToCapacityRatio", "shape": [{"utilization": 50, "score": 1},
                                                                      {"utilization": 50, "score": 2}]},
                        ScoringStrategy)  # fmt: skip
    with pytest.raises(msgspec.ValidationError, match="weight"):
        msgspec.convert({"resources": [{"name": "cpu", "weight": 101}]}, ScoringStrategy)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"type": "Balanced"}, ScoringStrategy)


# (pod, allocatable, requested, score): balanced_allocation_test.go
BALANCED_TABLE = [
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "4000", "memory": "10000"}, {}, 87, id="node1"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "6000", "memory": "10000"}, {}, 100, id="node2"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "10000", "memory": "20000"},
                 {"cpu": "3000", "memory": "0"}, 82, id="scheduled, node1"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "10000", "memory": "20000"},
                 {"cpu": "3000", "memory": "5000"}, 95, id="scheduled, node2"),
    pytest.param({"cpu": "3000", "memory": "5000"}, {"cpu": "4000", "memory": "10000"},
                 {"cpu": "3000", "memory": "0"}, 75, id="requested exceeds capacity: fraction 1"),
    pytest.param({"cpu": "1000"}, {"cpu": "4000"}, {}, 100, id="one resource reported"),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "allocatable", "requested", "score"), BALANCED_TABLE)
def test_balanced_allocation_scores_as_kube(
    pod: dict[str, str], allocatable: dict[str, str], requested: dict[str, str], score: int
) -> None:
    assert balanced_score(amounts(**pod), amounts(**allocatable), amounts(**requested)) == score


def image(name: str, mb: int) -> NodeImage:
    return NodeImage(names=(name,), size_bytes=mb * MIB)


NODE1_IMAGES = (image("gcr.io/40:latest", 40), image("gcr.io/300:latest", 300), image("gcr.io/2000:latest", 2000))
NODE2_IMAGES = (image("gcr.io/250:latest", 250), image("gcr.io/10:latest", 10))


@pytest.mark.parametrize(
    ("images", "node1", "node2"),
    [
        (("gcr.io/40", "gcr.io/250"), 0, 5),  # 40 MB * 1/2 is under 23 MB; 250 * 1/2 = 125 -> (125 - 23) / 1977
        (("gcr.io/40", "gcr.io/300"), 7, 0),  # (20 + 150 - 23) * 100 / (2000 - 23)
        (("gcr.io/2000", "gcr.io/10"), 49, 0),  # (1000 - 23) * 100 / (2000 - 23); 10 MB * 1/2 is under 23
        (("gcr.io/250:latest",), 0, 10),  # one container: (125 - 23) * 100 / (1000 - 23)
    ],
)
def test_image_locality_scores_as_kube(images: tuple[str, ...], node1: int, node2: int) -> None:
    counts = nodes_holding(images, (NODE1_IMAGES, NODE2_IMAGES))
    locality = ImageLocality(images, counts, 2)
    assert (locality.score(image_sizes(NODE1_IMAGES)), locality.score(image_sizes(NODE2_IMAGES))) == (node1, node2)


def test_image_names_get_latest_and_the_score_is_clamped() -> None:
    assert normalized_image_name("nginx") == "nginx:latest"
    assert normalized_image_name("registry:5000/nginx") == "registry:5000/nginx:latest"
    assert normalized_image_name("nginx:1.25") == "nginx:1.25"
    assert image_priority(0, 1) == 0
    assert image_priority(5000 * MIB, 2) == 100  # at most 1000 MiB per container


# Through the engine: a pod no vendor claims, on nodes that report allocatable.
def cpu_node(name: str, cpu: str, memory: str, **fields: object) -> NodeState:
    return NodeState(name=name, allocatable={"cpu": cpu, "memory": memory, "pods": "110"}, **fields)  # type: ignore[arg-type]


def cpu_pod(**fields: object) -> PodRequest:
    return PodRequest(uid="p", name="p", **fields)  # type: ignore[arg-type]


def test_a_cpu_pod_gets_fit_plus_balanced_allocation() -> None:
    snap = Snapshot(nodes=(cpu_node("node1", "4000", "10000"), cpu_node("node2", "6000", "10000")))
    decision = decide(snap, cpu_pod(requests={"cpu": "3000", "memory": "5000"}))
    assert verdicts(decision) == {"node1": 37.0 + 87, "node2": 50.0 + 100}
    assert decision.node == "node2"


def test_most_allocated_is_the_engines_choice_from_its_limits() -> None:
    snap = Snapshot(nodes=(cpu_node("node1", "4000", "10000"), cpu_node("node2", "6000", "10000")))
    engine = Engine(limits=Limits(scoring=MOST))
    decision = decide(snap, cpu_pod(requests={"cpu": "3000", "memory": "5000"}), engine)
    assert verdicts(decision) == {"node1": 62.0 + 87, "node2": 50.0 + 100}
    tight = Snapshot(nodes=(cpu_node("node1", "4000", "6000"), cpu_node("node2", "6000", "10000")))
    assert decide(tight, cpu_pod(requests={"cpu": "3000", "memory": "5000"}), engine).node == "node1"


def test_a_best_effort_pod_spreads_by_least_allocated_with_kubes_defaults() -> None:
    # nonzero_requested: the node's pods as kube counts them for scoring (4 pods asking nothing: 400m)
    busy = cpu_node("a", "1", "1Gi", nonzero_requested={"cpu": "400m", "memory": "800Mi"}, pods=4)
    idle = cpu_node("b", "1", "1Gi")
    decision = decide(Snapshot(nodes=(busy, idle)), cpu_pod())
    # a: cpu (1000 - 500) / 1000 = 50, memory (1024 - 1000) / 1024 = 2 -> 26; b: 90 and 80 -> 85; no balance
    assert verdicts(decision) == {"a": 26.0, "b": 85.0}


def test_image_locality_draws_a_pod_to_the_node_that_holds_its_image() -> None:
    holder = cpu_node("b", "4", "8Gi", images=(image("example.com/big:1", 900),))
    plain = cpu_node("a", "4", "8Gi")
    decision = decide(Snapshot(nodes=(plain, holder)), cpu_pod(images=("example.com/big:1",)))
    # 900 MiB * 1/2 = 450 MiB: (450 - 23) * 100 / (1000 - 23) = 43
    assert verdicts(decision)["b"] - verdicts(decision)["a"] == 43.0
    assert decision.node == "b"


def test_a_node_without_allocatable_gets_no_resource_points() -> None:
    decision = decide(Snapshot(nodes=(NodeState(name="old"),)), cpu_pod(requests={"cpu": "1"}))
    assert decision.node == "old" and decision.score == 0.0


def test_a_gpu_pods_score_is_its_device_score_alone() -> None:
    base = {"nvidia.com/gpu": "2", "pods": "110"}
    roomy = msgspec.structs.replace(node("b", [gpu(0), gpu(1)]), allocatable={**base, "cpu": "64", "memory": "1Ti"})
    full = msgspec.structs.replace(node("a", [gpu(0), gpu(1)]), allocatable={**base, "cpu": "8", "memory": "16Gi"},
                                   requested={"cpu": "7", "memory": "15Gi"})  # fmt: skip
    gpu_pod = PodRequest(uid="g", requests={"nvidia.com/gpu": "1", "cpu": "500m"}, images=("x",))
    decision = decide(Snapshot(nodes=(roomy, full)), gpu_pod)
    assert decision.node == "a"  # a tie of device scores goes by name, not by kube's resource scores
    assert verdicts(decision) == {"a": decision.score, "b": decision.score}
    assert "preference" not in decision.score_parts


# The walk (best class first, stopping once nothing can reach the best) against every node asked and
# sorted by (-score, name), the scores computed from the plugins' own functions.
@st.composite
def cpu_clusters(draw: st.DrawFn) -> tuple[Snapshot, PodRequest, ScoringStrategy]:
    nodes = []
    for i in range(draw(st.integers(1, 7))):
        cpu, memory = draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from([4, 8, 16]))
        used_cpu, used_memory = draw(st.integers(0, cpu * 1000)), draw(st.integers(0, memory))
        images = (image("app:1", draw(st.sampled_from([10, 400, 1200]))),) if draw(st.booleans()) else ()
        nodes.append(
            cpu_node(f"n{i}", str(cpu), f"{memory}Gi", requested={"cpu": f"{used_cpu}m", "memory": f"{used_memory}Gi"},
                     images=images)
        )  # fmt: skip
    requests = {"cpu": f"{draw(st.integers(0, 3000))}m"} if draw(st.booleans()) else {}
    if draw(st.booleans()):
        requests["memory"] = f"{draw(st.integers(0, 4))}Gi"
    pod = cpu_pod(requests=requests, images=("app:1",) if draw(st.booleans()) else ())
    return Snapshot(nodes=tuple(nodes)), pod, draw(st.sampled_from([LEAST, MOST, RATIO]))


def reference_score(node: NodeState, pod: PodRequest, strategy: ScoringStrategy, snap: Snapshot) -> float | None:
    allocatable, requested = parse_requests(node.allocatable or {}, "a"), parse_requests(node.requested, "r")
    asked = parse_requests(pod.requests, "p")
    if any(asked.get(r, 0) > allocatable.get(r, 0) - requested.get(r, 0) for r in ("cpu", "memory")):
        return None
    score = fit_score(strategy, nonzero_request(asked), allocatable, requested, requested)
    if asked.get("cpu") or asked.get("memory"):
        score += balanced_score(asked, allocatable, requested)
    if pod.images:
        holding = nodes_holding(pod.images, (n.images for n in snap.nodes))
        score += ImageLocality(pod.images, holding, len(snap.nodes)).score(image_sizes(node.images))
    return float(score)


@settings(max_examples=150, deadline=None)
@given(cpu_clusters())
def test_the_walk_finds_the_node_every_node_asked_would(case: tuple[Snapshot, PodRequest, ScoringStrategy]) -> None:
    snap, pod, strategy = case
    scored = [(s, n.name) for n in snap.nodes if (s := reference_score(n, pod, strategy, snap)) is not None]
    decision = Engine(limits=Limits(scoring=strategy)).place(snap, pod)
    if not scored:
        assert decision.node is None
        return
    best_score, best_name = min(scored, key=lambda t: (-t[0], t[1]))
    assert (decision.node, decision.score) == (best_name, best_score)


LEAST_LIKE_SHAPE = (ShapePoint(utilization=0, score=10), ShapePoint(utilization=100, score=0))
BIN_PACKING = (ShapePoint(utilization=0, score=0), ShapePoint(utilization=100, score=1))


@pytest.mark.parametrize(
    ("pod", "allocatable", "requested", "score"),
    [
        # TestRequestedToCapacityRatioScoringStrategy: cpu 25 and memory 50 average 37.5, Go rounds to 38
        ({"cpu": "3000", "memory": "5000"}, {"cpu": "4000", "memory": "10000"}, {}, 38),
        ({"cpu": "3000", "memory": "5000"}, {"cpu": "6000", "memory": "10000"}, {}, 50),
        ({"cpu": "0", "memory": "0"}, {"cpu": "4000", "memory": "10000"}, {"cpu": "3000", "memory": "5000"}, 38),
        ({"cpu": "0", "memory": "0"}, {"cpu": "6000", "memory": "10000"}, {"cpu": "3000", "memory": "5000"}, 50),
    ],
)
def test_requested_to_capacity_ratio_as_kubes_table(
    pod: dict[str, str], allocatable: dict[str, str], requested: dict[str, str], score: int
) -> None:
    strategy = ScoringStrategy(type="RequestedToCapacityRatio", shape=LEAST_LIKE_SHAPE)
    assert fit(strategy, amounts(**pod), amounts(**allocatable), amounts(**requested)) == score


@pytest.mark.parametrize(
    ("pod", "node1", "node2", "scores"),
    [
        # TestResourceBinPackingSingleExtended: intel.com/foo 8 on node1, 4 on node2
        ({}, {}, {}, (0, 0)),
        ({EXTENDED: "2"}, {}, {}, (2, 5)),
        ({EXTENDED: "2"}, {}, {EXTENDED: "2"}, (2, 10)),
        ({EXTENDED: "4"}, {}, {}, (5, 10)),
    ],
)
def test_requested_to_capacity_ratio_bin_packs_an_extended_resource(
    pod: dict[str, str], node1: dict[str, str], node2: dict[str, str], scores: tuple[int, int]
) -> None:
    strategy = ScoringStrategy(type="RequestedToCapacityRatio", resources=(ResourceWeight(name=EXTENDED),),
                               shape=BIN_PACKING)  # fmt: skip
    asked = parse_requests(pod, "pod")
    capacities = (parse_requests({EXTENDED: "8"}, "a"), parse_requests({EXTENDED: "4"}, "a"))
    used = (parse_requests(node1, "r"), parse_requests(node2, "r"))
    assert tuple(fit(strategy, asked, c, u) for c, u in zip(capacities, used, strict=True)) == scores


def test_requested_to_capacity_ratio_weighs_several_extended_resources() -> None:
    # TestResourceBinPackingMultipleExtended: foo weighs 3, bar 5; (2 * 3 + 5 * 5) / 8 rounds to 4
    bar = "intel.com/bar"
    strategy = ScoringStrategy(
        type="RequestedToCapacityRatio",
        resources=(ResourceWeight(name=EXTENDED, weight=3), ResourceWeight(name=bar, weight=5)),
        shape=BIN_PACKING,
    )
    pod = parse_requests({EXTENDED: "2", bar: "2"}, "pod")
    node1, node2 = parse_requests({EXTENDED: "8", bar: "4"}, "a"), parse_requests({EXTENDED: "4", bar: "8"}, "a")
    assert (fit(strategy, pod, node1, {}), fit(strategy, pod, node2, {})) == (4, 3)
    assert fit(strategy, {}, node1, {}) == 0
