"""Parked pods are retried as kube-scheduler retries unschedulable pods: only on an event that could
help them, each after its own backoff, at most RETRY_BUDGET per event or tick, and none parked forever.

2,000 unplaceable pods that ask for no GPU were all decided again on every event that freed
anything, on the placer's event loop (1.6-3.6 s each time).
"""

from __future__ import annotations

import math

import msgspec
from placer_builders import FakeClock, lifecycle, pending, status, topology, usage
from scripted_engine import ScriptedEngine

from engine import Decision, Mode, PodRequest, Snapshot
from schemas.dra import DraDevice
from schemas.events import LifecyclePhase, PendingPodEvent, PlacementOutcome, ResourceSliceEvent
from services.placer.decide import RETRY_BUDGET, Decider
from services.placer.parking import INITIAL_BACKOFF_S, MAX_BACKOFF_S, MAX_PARKED_S, backoff_s

CPU_SHORT = "0/1 nodes are available: 1 Insufficient cpu."
GPU_SHORT = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


class CountingEngine:
    """A place function that never fits, with the reason a pod of its kind would get; counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT) -> Decision:
        self.calls.append(request.uid)
        asks_gpu = request.requests.get("nvidia.com/gpu", "0") != "0"
        return Decision(node=None, reason=GPU_SHORT if asks_gpu else CPU_SHORT)


def cpu_pod(uid: str, priority: int = 0) -> PendingPodEvent:
    return msgspec.structs.replace(pending(uid, 0, priority=priority), requests={"cpu": "4"})


def _setup(parked: list[PendingPodEvent]) -> tuple[Decider, CountingEngine, FakeClock]:
    engine, clock = CountingEngine(), FakeClock()
    decider = Decider(engine=ScriptedEngine(engine), clock=clock)
    decider.on_event(topology("a", 2))
    decider.on_event(status("a", allocatable={"cpu": "8", "pods": "110"}))
    for pod in parked:
        placement = decider.on_pending(pod).placement
        assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    engine.calls.clear()
    return decider, engine, clock


def _a_cpu_pod_leaves(decider: Decider, uid: str = "running-cpu") -> None:
    """A running pod that held only cpu on node a is deleted: cpu and a pod slot are freed."""
    decider.on_event(lifecycle(uid, LifecyclePhase.BOUND, "a"))
    decider.on_event(lifecycle(uid, LifecyclePhase.DELETED))


def test_one_capacity_event_re_decides_at_most_the_budget_of_2000_parked_pods() -> None:
    decider, engine, clock = _setup([cpu_pod(f"p{i:04d}") for i in range(2000)])
    clock.advance(MAX_BACKOFF_S)
    _a_cpu_pod_leaves(decider)
    assert 0 < len(engine.calls) <= RETRY_BUDGET
    # The rest stay queued: each tick takes the next budget, oldest queued first, none twice.
    ticks = 0
    while len(engine.calls) < 2000:
        before = len(engine.calls)
        decider.tick()
        assert 0 < len(engine.calls) - before <= RETRY_BUDGET
        ticks += 1
    assert ticks <= math.ceil(2000 / RETRY_BUDGET)
    assert sorted(engine.calls) == [f"p{i:04d}" for i in range(2000)]


def test_a_pod_in_backoff_waits_for_it_to_pass() -> None:
    decider, engine, clock = _setup([cpu_pod("p")])
    clock.advance(INITIAL_BACKOFF_S / 2)
    _a_cpu_pod_leaves(decider)
    assert engine.calls == []  # queued by the event, but still backing off
    clock.advance(INITIAL_BACKOFF_S / 2)
    decider.tick()
    assert engine.calls == ["p"]


def test_the_backoff_doubles_from_1_s_to_10_s() -> None:
    assert [backoff_s(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    decider, engine, clock = _setup([cpu_pod("p")])
    waited = []
    for i in range(5):
        before = len(engine.calls)
        _a_cpu_pod_leaves(decider, f"running-{i}")  # queues it; it is retried once its backoff has passed
        steps = 0
        while len(engine.calls) == before:
            clock.advance(0.5)
            decider.tick()
            steps += 1
        waited.append(steps * 0.5)
    assert waited == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_a_pod_short_of_gpus_is_not_retried_when_only_cpu_frees() -> None:
    gpu_pod = pending("g", 2, cpu="1")
    decider, engine, clock = _setup([gpu_pod, cpu_pod("c")])
    clock.advance(MAX_BACKOFF_S)
    _a_cpu_pod_leaves(decider)
    assert engine.calls == ["c"]
    clock.advance(MAX_BACKOFF_S)
    # A GPU pod that held devices leaves: devices (and its cpu) are freed.
    decider.on_event(lifecycle("running-gpu", LifecyclePhase.BOUND, "a", (0, 1)))
    decider.on_event(lifecycle("running-gpu", LifecyclePhase.DELETED))
    assert sorted(engine.calls) == ["c", "c", "g"]


def test_a_cpu_pod_is_not_retried_when_a_device_heals_or_a_slice_changes() -> None:
    decider, engine, clock = _setup([cpu_pod("c")])
    clock.advance(MAX_BACKOFF_S)
    decider.on_event(usage("a", unhealthy=(1,), devices=2))
    decider.on_event(usage("a", unhealthy=(), devices=2))  # device 1 healthy again
    device = DraDevice(name="gpu-0", uuid="GPU-a-0", attributes={})
    decider.on_event(ResourceSliceEvent(name="a-gpus", node="a", driver="gpu.nvidia.com", pool="a", devices=(device,)))
    for _ in range(3):
        decider.tick()
    assert engine.calls == []
    decider.on_event(topology("b", 2))  # a new node may suit any pod
    assert engine.calls == ["c"]


def test_every_parked_pod_is_retried_after_five_minutes_without_any_event() -> None:
    decider, engine, clock = _setup([cpu_pod(f"p{i:04d}", priority=i % 3) for i in range(500)])
    clock.advance(MAX_PARKED_S - 1)
    decider.tick()
    assert engine.calls == []
    clock.advance(1)
    for _ in range(math.ceil(500 / RETRY_BUDGET)):
        decider.tick()
    assert sorted(engine.calls) == [f"p{i:04d}" for i in range(500)]
    assert {int(uid[1:]) % 3 for uid in engine.calls[:RETRY_BUDGET]} == {2}  # higher priority first


def test_a_pod_asking_an_extended_resource_is_retried_when_a_slice_changes() -> None:
    from schemas.dra import ContainerRequests

    containers = (ContainerRequests(name="main", requests={"nvidia.com/gpu": "2"}),)
    asking = msgspec.structs.replace(pending("g", 2), containers=containers)  # a DeviceClass may serve it
    decider, engine, clock = _setup([asking])
    clock.advance(MAX_BACKOFF_S)
    device = DraDevice(name="gpu-0", uuid="GPU-a-0", attributes={})
    decider.on_event(ResourceSliceEvent(name="a-gpus", node="a", driver="gpu.nvidia.com", pool="a", devices=(device,)))
    assert engine.calls == ["g"]
