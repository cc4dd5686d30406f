"""The workload mix the placer learns for the fragmentation node policy, and how it reaches the engine."""

from __future__ import annotations

import msgspec
import pytest
from placer_builders import GPU, first_fit, pending, status, topology
from scripted_engine import ScriptedEngine

from engine import Decision, Mode, PodRequest, Snapshot, WorkloadClass
from engine.node.vendor import NODE_POLICY
from schemas.events import PendingPodEvent
from services.placer.decide import Decider, decide, pod_request
from services.placer.view import ClusterView
from services.placer.workload_mix import WorkloadMix, pod_class
from topoplace.config import ConfigError, Settings


def share(uid: str, cores: int) -> PendingPodEvent:
    return msgspec.structs.replace(
        pending(uid), requests={"nvidia.com/gpu": "1", "nvidia.com/gpucores": str(cores), "nvidia.com/gpumem": "1000"}
    )


@pytest.mark.parametrize(
    ("requests", "shape"),
    [
        ({"nvidia.com/gpu": "2"}, (2, 1000, 0)),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "25"}, (1, 250, 0)),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}, (1, 1000, 0)),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}, (1, 1000, 0)),  # no compute share named
        ({"nvidia.com/gpu": "1", "cpu": "4"}, (1, 1000, 0)),  # CPU not weighed
        ({"cpu": "4"}, None),  # a CPU-only pod counts only when CPU is weighed
        ({"aws.amazon.com/neuron": "4"}, None),
        ({"nvidia.com/gpu": "two"}, None),
    ],
)
def test_pod_class_of_a_pending_pod(requests: dict[str, str], shape: tuple[int, int, int] | None) -> None:
    assert pod_class(msgspec.structs.replace(pending("p"), requests=requests)) == shape


@pytest.mark.parametrize(
    ("requests", "shape"),
    [
        ({"nvidia.com/gpu": "1", "cpu": "4"}, (1, 1000, 4000)),
        ({"cpu": "500m", "memory": "1Gi"}, (0, 1000, 500)),  # CPU-only: FGD counts these too
        ({"cpu": "2", "aws.amazon.com/neuron": "1"}, None),  # another vendor's pod
        ({"memory": "1Gi"}, None),  # nothing the measure weighs
        ({"nvidia.com/gpu": "1", "cpu": "lots"}, None),
    ],
)
def test_pod_class_with_cpu(requests: dict[str, str], shape: tuple[int, int, int] | None) -> None:
    assert pod_class(msgspec.structs.replace(pending("p"), requests=requests), with_cpu=True) == shape


def test_with_cpu_the_classes_carry_cpu_and_cpu_only_pods() -> None:
    mix = WorkloadMix(window=10, coverage=1.0, with_cpu=True)
    for i in range(6):
        mix.observe(msgspec.structs.replace(pending(f"g{i}"), requests={"nvidia.com/gpu": "1", "cpu": "8"}))
    for i in range(4):
        mix.observe(msgspec.structs.replace(pending(f"c{i}"), requests={"cpu": "2"}))
    assert mix.classes() == (
        WorkloadClass(gpus=1, milli=1000, weight=0.6, cpu_milli=8000),
        WorkloadClass(gpus=0, milli=1000, weight=0.4, cpu_milli=2000),
    )


def test_the_fragmentation_policy_makes_the_placer_weigh_cpu() -> None:
    assert Decider(node_policy="fragmentation").view.index().reads.resources
    assert not Decider(node_policy="binpack").view.index().reads.resources


def test_classes_cover_the_window_most_common_first_with_their_share() -> None:
    mix = WorkloadMix(window=100, coverage=0.9)
    for i in range(60):
        mix.observe(share(f"s{i}", 25))
    for i in range(35):
        mix.observe(pending(f"w{i}", 1))
    for i in range(5):
        mix.observe(pending(f"e{i}", 8))
    # 60 % + 35 % reach the 90 % coverage; the 5 % class of 8 GPUs is left out.
    assert mix.classes() == (
        WorkloadClass(gpus=1, milli=250, weight=0.6),
        WorkloadClass(gpus=1, milli=1000, weight=0.35),
    )


def test_the_window_forgets_the_oldest_pods() -> None:
    mix = WorkloadMix(window=3, coverage=1.0)
    for uid in ("a", "b", "c"):
        mix.observe(pending(uid, 2))
    for uid in ("d", "e", "f"):
        mix.observe(pending(uid, 4))
    assert mix.classes() == (WorkloadClass(gpus=4, milli=1000, weight=1.0),)


def test_bad_window_or_coverage_is_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        WorkloadMix(window=0)
    with pytest.raises(ValueError, match="coverage"):
        WorkloadMix(coverage=0)


def test_the_cluster_node_policy_applies_to_pods_that_name_none() -> None:
    assert pod_request(pending("p"), node_policy="fragmentation").annotations[NODE_POLICY] == "fragmentation"
    own = msgspec.structs.replace(pending("q"), annotations={NODE_POLICY: "spread"})
    assert pod_request(own, node_policy="fragmentation").annotations[NODE_POLICY] == "spread"
    assert NODE_POLICY not in pod_request(pending("r")).annotations


def test_decide_hands_the_engine_the_workload_and_the_policy() -> None:
    seen: list[tuple[Snapshot, PodRequest]] = []

    def recording(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT) -> Decision:
        seen.append((snapshot, request))
        return first_fit(snapshot, request, mode)

    view = ClusterView()
    view.apply(topology("a", 4))
    view.apply(status("a"))
    mix = (WorkloadClass(gpus=1, milli=500, weight=1.0),)
    decide(view, pending("p"), engine=ScriptedEngine(recording), node_policy="fragmentation", workload=mix)
    snapshot, request = seen[0]
    assert snapshot.workload == mix and request.annotations[NODE_POLICY] == "fragmentation"


def test_the_decider_learns_the_mix_and_the_engine_scores_fragmentation() -> None:
    decider = Decider(node_policy="fragmentation")
    for name in ("a", "b"):
        decider.on_event(topology(name, 4))
        decider.on_event(status(name))
    result = decider.on_pending(share("p1", 50))
    assert decider.mix.classes() == (WorkloadClass(gpus=1, milli=500, weight=1.0),)
    assert result.placement is not None and result.placement.node in ("a", "b")
    assert "frag_delta" in result.placement.score_parts  # the engine ranked by fragmentation


def test_node_policy_setting_is_checked() -> None:
    assert Settings.from_env({"TOPOPLACE_NODE_POLICY": "fragmentation"}).node_policy == "fragmentation"
    with pytest.raises(ConfigError, match="TOPOPLACE_NODE_POLICY"):
        Settings.from_env({"TOPOPLACE_NODE_POLICY": "tetris"})


async def test_hami_mode_refuses_the_fragmentation_policy_at_start() -> None:
    from services.placer.service import run_placer

    with pytest.raises(ConfigError, match="TOPOPLACE_NODE_POLICY"):
        await run_placer(Settings(node_policy="fragmentation"), mode=Mode.HAMI)


@pytest.mark.parametrize(("node_policy", "winner"), [("fragmentation", "b"), ("binpack", "a")])
def test_the_placer_keeps_a_pods_cpu_from_stranding_a_nodes_gpus(node_policy: str, winner: str) -> None:
    # a: 8 cores, b: 16 cores, 2 idle GPUs each. The pods seen so far take a GPU and 4 cores each. A GPU pod
    # with 6 cores would leave a 2 cores: no pod of the mix could use a's other GPU any more; b keeps 10.
    # The fragmentation policy sends it to b; binpack, blind to that, to a (equal fill, first by name).
    decider = Decider(node_policy=node_policy)
    for name, cores in (("a", "8"), ("b", "16")):
        decider.on_event(topology(name, 2))
        decider.on_event(status(name, allocatable={"cpu": cores, "pods": "110", GPU: "20"}))
    for i in range(9):
        decider.mix.observe(pending(f"seen-{i}", cpu="4"))
    result = decider.on_pending(pending("p", cpu="6"))
    assert result.placement is not None
    assert result.placement.node == winner
