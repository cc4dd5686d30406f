"""The one rule for nominated pods' room (kube's addNominatedPods): held from pods of lower or equal
priority, never from the pod itself or one of higher priority, and only its own request."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.core.model import Allocation, NodeState, Snapshot
from engine.decide.preempt.model import RunningPod
from engine.decide.preempt.nominated import NominatedRoom, held_from, held_shares, holds_from, with_nominated


def room(uid: str, priority: int, node: str = "n", *indices: int) -> NominatedRoom:
    shares = tuple(Allocation(pod_uid=uid, index=i, memory_mib=4000, cores=50) for i in indices)
    return NominatedRoom(holder=uid, key=f"default/{uid}", node=node, priority=priority, devices=shares)


def test_room_is_held_from_lower_or_equal_priority_and_never_from_higher() -> None:
    assert holds_from(5, 4) and holds_from(5, 5) and not holds_from(5, 6)
    rooms = [room("a", 5, "n", 0), room("b", 3, "n", 1)]
    assert [r.holder for r in held_from(rooms, 5)] == ["a"]
    assert [r.holder for r in held_from(rooms, 3)] == ["a", "b"]
    assert held_from(rooms, 6) == []


def test_a_pod_never_holds_room_from_itself_by_uid_or_name() -> None:
    rooms = [room("a", 5, "n", 0)]
    assert held_from(rooms, 0, ("a",)) == [] and held_from(rooms, 0, ("default/a",)) == []


def test_only_the_nominated_pods_own_shares_are_held() -> None:
    node = NodeState(name="n", allocations=(Allocation(pod_uid="x", index=2),))
    held = with_nominated(Snapshot(nodes=(node,)), [room("a", 5, "n", 0), room("b", 5, "m", 1)], 5, "default/c")
    assert held.nodes[0].allocations == (
        Allocation(pod_uid="x", index=2),
        Allocation(pod_uid="a", index=0, memory_mib=4000, cores=50),
    )
    assert held.nodes[0].pods == 1


def test_a_nominated_pod_read_from_kubernetes_objects_holds_its_requests_and_no_device() -> None:
    pod = RunningPod(name="a", node="n", holder="a", priority=5, requests={"cpu": "2"})
    held = with_nominated(Snapshot(nodes=(NodeState(name="n"),)), [pod], 5, "default/c")
    assert held.nodes[0].requested == {"cpu": "2"} and held.nodes[0].allocations == ()


@given(
    priorities=st.lists(st.integers(0, 4), max_size=6),
    priority=st.integers(0, 4),
)
def test_the_shares_held_are_exactly_those_of_rooms_of_higher_or_equal_priority(
    priorities: list[int], priority: int
) -> None:
    rooms = [room(f"p{i}", p, "n", i) for i, p in enumerate(priorities)]
    shares = held_shares(held_from(rooms, priority), "n")
    assert {s.pod_uid for s in shares} == {f"p{i}" for i, p in enumerate(priorities) if p >= priority}
