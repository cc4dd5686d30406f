"""Preemption in the placer: a pod that fits nowhere nominates a node and names its victims (chosen by the
devices they free), the room is held for it from lower-priority pods, it waits for its victims, then is placed."""

from __future__ import annotations

import msgspec
from placer_builders import GPU, FakeClock, pending, status

from engine import Engine
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    DisruptionBudgetEvent,
    LabelSelector,
    LifecyclePhase,
    NodeTopologyEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from schemas.topology import Device, Link, PcieLevel, Vendor
from services.placer.decide import Decider

QUADS = ((0, 1, 2, 3), (4, 5, 6, 7))
# Four pods hold two GPUs each, two per NVLink quad. A count of GPUs (kube) would evict the two least
# important, b and c: two halves of two quads. Evicting a and b frees the quad 0-3 whole.
HOLDERS = {"a": ((0, 1), 5), "b": ((2, 3), 1), "c": ((4, 5), 2), "d": ((6, 7), 6)}


def two_quads(node: str) -> NodeTopologyEvent:
    links = []
    for a in range(8):
        for b in range(8):
            if a != b:
                same = (a < 4) == (b < 4)
                links.append(Link(src=a, dst=b, nvlinks=2 if same else 0, pcie=None if same else PcieLevel.SYS))
    devices = tuple(
        Device(index=i, uuid=f"GPU-{node}-{i}", vendor=Vendor.NVIDIA, model="H100", memory_mib=80000) for i in range(8)
    )
    return NodeTopologyEvent(node=node, machine_type="dgx", devices=devices, links=tuple(links))


def bound(name: str, node: str, gpus: tuple[int, ...], priority: int, **fields: object) -> PodLifecycleEvent:
    return PodLifecycleEvent(
        uid=f"uid-{name}",
        namespace="default",
        name=name,
        phase=LifecyclePhase.BOUND,
        node=node,
        devices=tuple(DeviceAssignment(index=i) for i in gpus),
        requests={GPU: str(len(gpus))},
        priority=priority,
        started_at=1000.0,
        **fields,  # type: ignore[arg-type]
    )


def gone(name: str, node: str) -> PodLifecycleEvent:
    return PodLifecycleEvent(uid=f"uid-{name}", namespace="default", name=name, phase=LifecyclePhase.DELETED, node=node)


def full_node(**labels: dict[str, str]) -> Decider:
    decider = Decider(engine=Engine())
    decider.on_event(two_quads("n"))
    decider.on_event(status("n", allocatable={GPU: "8", "cpu": "64", "memory": "512Gi", "pods": "110"}))
    for name, (gpus, priority) in HOLDERS.items():
        decider.on_event(bound(name, "n", gpus, priority, labels=labels.get(name, {})))
    return decider


def test_a_pod_that_fits_nowhere_evicts_the_two_pods_that_free_one_quad() -> None:
    decider = full_node()
    result = decider.on_pending(pending("hi", 4, priority=10), now=100.0)
    placement = result.placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.nominated_node == "n" and placement.priority == 10
    assert sorted(v.name for v in placement.victims) == ["a", "b"]
    assert {v.uid for v in placement.victims} == {"uid-a", "uid-b"}


def test_never_and_equal_priority_do_not_preempt() -> None:
    decider = full_node()
    never = msgspec.structs.replace(pending("never", 4, priority=10), preemption_policy="Never")
    refused = decider.on_pending(never, now=100.0).placement
    assert refused is not None and not refused.victims and not refused.nominated_node
    assert "preemptionPolicy=Never" in refused.reason
    low = decider.on_pending(pending("low", 2, priority=1), now=100.0).placement
    assert low is not None and not low.victims  # only strictly lower priority pods (none below 1 here)


def test_a_budget_that_allows_no_disruption_moves_the_victims() -> None:
    """a is protected by a budget allowing none (kube evicts budget-violating pods last): c and d, which free
    the other quad whole, go instead."""
    decider = full_node(a={"app": "db"})
    budget = DisruptionBudgetEvent(
        namespace="default", name="db", selector=LabelSelector(match_labels={"app": "db"}), disruptions_allowed=0
    )
    decider.on_event(budget)
    placement = decider.on_pending(pending("hi", 4, priority=10), now=100.0).placement
    assert placement is not None
    assert sorted(v.name for v in placement.victims) == ["c", "d"]
    assert not any(v.violates_budget for v in placement.victims)


def test_the_room_is_held_then_the_nominated_pod_is_placed_there() -> None:
    decider = full_node()
    nominating = decider.on_pending(pending("hi", 4, priority=10), now=100.0).placement
    assert nominating is not None and nominating.nominated_node == "n"
    # while its victims run, the nominated pod waits: no second preemption
    again = decider.on_pending(pending("hi", 4, priority=10, rv="2"), now=101.0).placement
    assert again is not None and not again.victims and "waiting for 2 pod(s)" in again.reason
    decider.on_event(gone("a", "n"), now=102.0)
    decider.on_event(gone("b", "n"), now=102.0)
    # a lower-priority pod may not take the freed room, even though four GPUs are free
    thief = decider.on_pending(pending("thief", 2, priority=2), now=103.0).placement
    assert thief is not None and thief.outcome is PlacementOutcome.UNSCHEDULABLE and not thief.victims
    placed = decider.on_pending(pending("hi", 4, priority=10, rv="3"), now=104.0).placement
    assert placed is not None and placed.outcome is PlacementOutcome.PLACED
    assert placed.node == "n" and sorted(d.index for d in placed.devices) == [0, 1, 2, 3]
    # placed: the room is its own now, nothing is held any more
    assert decider.view.nominations.live(105.0) == []


def test_a_nomination_expires() -> None:
    decider = full_node()
    decider.on_pending(pending("hi", 4, priority=10), now=100.0)
    decider.on_event(gone("a", "n"))
    decider.on_event(gone("b", "n"))
    later = 100.0 + decider.view.nominations.ttl + 1
    thief = decider.on_pending(pending("thief", 2, priority=3), now=later).placement
    assert thief is not None and thief.outcome is PlacementOutcome.PLACED


def test_a_restarted_placer_rebuilds_the_nomination_from_the_placements_topic() -> None:
    nominating = full_node().on_pending(pending("hi", 4, priority=10), now=100.0).placement
    assert nominating is not None
    restarted = full_node()
    restarted.on_event(nominating, now=101.0)  # replayed from offset 0
    restarted.on_event(gone("a", "n"))
    restarted.on_event(gone("b", "n"))
    thief = restarted.on_pending(pending("thief", 2, priority=2), now=102.0).placement
    assert thief is not None and thief.outcome is PlacementOutcome.UNSCHEDULABLE


def test_a_preemption_the_binder_refused_waits_for_no_victim() -> None:
    """The binder answered the nominating decision with a conflict: its victims will not go, so the pod is
    decided afresh (and may preempt again) instead of waiting for them."""
    decider = full_node()
    nominating = decider.on_pending(pending("hi", 4, priority=10), now=100.0).placement
    assert nominating is not None
    refused = BindingEvent(
        decision_id=nominating.decision_id,
        uid="hi",
        namespace="default",
        name="pod-hi",
        outcome=BindingOutcome.CONFLICT,
        reason="preemption refused",
    )
    decider.on_event(refused, now=101.0)
    assert decider.view.nominations.live(101.0) == []
    again = decider.on_pending(pending("hi", 4, priority=10, rv="2"), now=102.0).placement
    assert again is not None and again.victims  # not "waiting"


def test_a_nomination_replayed_after_the_placement_that_ended_it_holds_nothing() -> None:
    """Nominations (keyed by pod) and placements (keyed by node) are replayed from different partitions:
    a nomination read after the pod's later placement is over, and holds no room."""
    first = full_node()
    nominating = first.on_pending(pending("hi", 4, priority=10), now=100.0).placement
    first.on_event(gone("a", "n"))
    first.on_event(gone("b", "n"))
    placed = first.on_pending(pending("hi", 4, priority=10, rv="2"), now=104.0).placement
    assert nominating is not None and placed is not None and placed.outcome is PlacementOutcome.PLACED
    restarted = full_node()
    restarted.on_event(placed, now=105.0)
    restarted.on_event(nominating, now=105.0)
    assert restarted.view.nominations.live(106.0) == []


def test_a_gang_member_is_never_a_victim_of_a_single_pod() -> None:
    """Evicting one member could leave its gang below minMember: b and c, in a gang, stay; the pod waits."""
    decider = Decider(engine=Engine())
    decider.on_event(two_quads("n"))
    decider.on_event(status("n", allocatable={GPU: "8", "cpu": "64", "memory": "512Gi", "pods": "110"}))
    for name, (gpus, priority) in HOLDERS.items():
        decider.on_event(bound(name, "n", gpus, priority, gang="default/g" if name in ("a", "b", "c") else ""))
    placement = decider.on_pending(pending("hi", 4, priority=10), now=100.0).placement
    assert placement is not None and not placement.victims and not placement.nominated_node


def test_a_preemption_waits_until_the_cluster_reports_the_pods_decided_on_its_node() -> None:
    """d was decided onto the node but the cluster has not reported it bound yet: its GPUs are held, yet it
    cannot be weighed as a victim (no priority, labels or start time known). Choosing without it would
    evict a and b, breaking a's budget, as the only quad then freeable; the pod waits instead, and d's
    report wakes it: c and d go."""
    clock = FakeClock()
    decider = Decider(engine=Engine(), clock=clock)
    decider.on_event(two_quads("n"))
    decider.on_event(status("n", allocatable={GPU: "8", "cpu": "64", "memory": "512Gi", "pods": "110"}))
    for name in ("a", "b", "c"):
        gpus, priority = HOLDERS[name]
        decider.on_event(bound(name, "n", gpus, priority, labels={"app": "db"} if name == "a" else {}))
    decider.on_event(
        DisruptionBudgetEvent(
            namespace="default", name="db", selector=LabelSelector(match_labels={"app": "db"}), disruptions_allowed=0
        )
    )
    decided = decider.on_pending(pending("d", 2, priority=6), now=90.0).placement
    assert decided is not None and decided.outcome is PlacementOutcome.PLACED
    assert sorted(d.index for d in decided.devices) == [6, 7]
    waiting = decider.on_pending(pending("hi", 4, priority=10), now=100.0).placement
    assert waiting is not None and not waiting.victims and not waiting.nominated_node
    assert "waiting for the cluster to report 1 pod(s) decided on node n" in waiting.reason
    clock.advance(10.0)  # past the parked pod's backoff
    reported = bound("d", "n", (6, 7), 6)
    follow_ups = decider.on_event(msgspec.structs.replace(reported, uid="d", name=decided.name), now=102.0)
    [retried] = [f.placement for f in follow_ups if isinstance(f.placement, PlacementEvent)]
    assert retried.uid == "hi" and retried.nominated_node == "n"
    assert sorted(v.name for v in retried.victims) == ["c", decided.name]
    assert not any(v.violates_budget for v in retried.victims)
