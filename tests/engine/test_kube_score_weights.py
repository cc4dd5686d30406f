"""Whose score leads: the device policy's for pods a vendor claims, kube-scheduler's default weights elsewhere.

InterPodAffinity and PodTopologySpread score 0..100 each, weighted 2: up to 400 points. Added as they
are to a GPU pod's device score they would outweigh any device-score difference; for such a pod they
only break the device policy's ties. A pod without devices keeps kube-scheduler's default weights.
"""

from __future__ import annotations

import msgspec
from engine_builders import gpu, node
from pod_topology_builders import HOSTNAME, ZONE, affinities, decide, incoming, running, snapshot, spread, term

from engine import NodeState, PodRequest
from engine.core.model import PlacedPod

WEB = {"app": "web"}


def gpu_node(name: str, zone: str, busy: tuple[int, ...], *pods: PlacedPod) -> NodeState:
    """Four H100s (those in `busy` held): the default binpack policy scores a fuller node higher."""
    base = node(name, [gpu(i) for i in range(4)], busy=busy)
    return msgspec.structs.replace(base, labels={HOSTNAME: name, ZONE: zone}, running=pods)


def spread_pod(**fields: object) -> PodRequest:
    return incoming(labels=WEB, constraints=(spread(ZONE, hard=False, labels=WEB),), **fields)  # type: ignore[arg-type]


def test_a_gpu_pod_follows_the_device_score_over_the_spread_score() -> None:
    crowded = gpu_node("a", "z1", (0,), running("r1", **WEB), running("r2", **WEB))  # device score 10
    empty = gpu_node("b", "z2", ())  # device score 5, but the emptier zone
    decision = decide(snapshot(crowded, empty), spread_pod(requests={"nvidia.com/gpu": "1"}))
    assert decision.node == "a"
    assert decision.score == 10.0  # the spread points never show in the score as reported


def test_the_spread_score_breaks_a_gpu_pods_device_score_tie() -> None:
    crowded = gpu_node("a", "z1", (), running("r1", **WEB), running("r2", **WEB))
    empty = gpu_node("b", "z2", ())  # same device score: the emptier zone wins the tie ("a" would by name)
    decision = decide(snapshot(crowded, empty), spread_pod(requests={"nvidia.com/gpu": "1"}))
    assert decision.node == "b"
    assert decision.score == 5.0


def test_preferred_anti_affinity_breaks_a_gpu_pods_tie_but_not_a_difference() -> None:
    anti = affinities(preferred_anti=((100, term(HOSTNAME, labels=WEB)),))
    pod = incoming(labels=WEB, affinity=anti, requests={"nvidia.com/gpu": "1"})
    tied = decide(snapshot(gpu_node("a", "z1", (), running("r1", **WEB)), gpu_node("b", "z1", ())), pod)
    assert tied.node == "b"
    apart = decide(snapshot(gpu_node("a", "z1", (0,), running("r1", **WEB)), gpu_node("b", "z1", ())), pod)
    assert apart.node == "a"


def test_a_pod_without_devices_keeps_kube_schedulers_default_weights() -> None:
    crowded = gpu_node("a", "z1", (0,), running("r1", **WEB), running("r2", **WEB))
    empty = gpu_node("b", "z2", ())
    decision = decide(snapshot(crowded, empty), spread_pod())
    assert decision.node == "b"
    assert decision.score == 200.0  # PodTopologySpread's 100, weighted 2
