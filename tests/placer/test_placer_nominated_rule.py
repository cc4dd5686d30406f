"""The placer and the binder hold the same room for nominated pods (the engine's one rule): on random
nominations and pods, the shares the placer counts on a node are exactly those the binder checks a
placement against, and every pod the placer places there the binder accepts beside them."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from placer_builders import status, topology

from engine import Engine
from schemas.events import DeviceAssignment, PendingPodEvent, PlacementEvent, PlacementOutcome
from services.binder.ledger import DeviceLedger
from services.binder.reservations import Reservations, nominated_holders
from services.placer.decide import Decider
from services.placer.preemption import holding_nominated
from services.placer.view import ClusterView

NODES = ("n1", "n2")
DEVICES = 4
NOW = 100.0


class Nominee(msgspec.Struct, frozen=True):
    uid: str
    node: str
    priority: int
    devices: tuple[DeviceAssignment, ...]


def share() -> st.SearchStrategy[DeviceAssignment]:
    return st.builds(
        DeviceAssignment,
        index=st.integers(0, DEVICES - 1),
        memory_mib=st.sampled_from([0, 4000, 8000]),
        cores=st.sampled_from([0, 25, 50, 100]),
    )


def nominees(nodes: tuple[str, ...]) -> st.SearchStrategy[list[Nominee]]:
    one = st.builds(
        Nominee,
        uid=st.sampled_from([f"u{i}" for i in range(6)]),
        node=st.sampled_from(nodes),
        priority=st.integers(0, 3),
        devices=st.lists(share(), max_size=3, unique_by=lambda d: d.index).map(tuple),
    )
    return st.lists(one, max_size=6, unique_by=lambda n: n.uid)


def nominating(n: Nominee) -> PlacementEvent:
    return PlacementEvent(
        decision_id=f"d-{n.uid}",
        uid=n.uid,
        namespace="default",
        name=f"pod-{n.uid}",
        pod_resource_version="1",
        outcome=PlacementOutcome.UNSCHEDULABLE,
        nominated_node=n.node,
        nominated_devices=n.devices,
        priority=n.priority,
        decided_at=NOW,
    )


def binder_reservations(nominated: list[Nominee]) -> Reservations:
    reservations = Reservations()
    for n in nominated:
        reservations.reserve(n.uid, f"default/pod-{n.uid}", n.node, n.priority, n.devices, 1, NOW)
    return reservations


@settings(max_examples=200, deadline=None)
@given(nominated=nominees(NODES), uid=st.sampled_from(["u0", "u1", "other"]), priority=st.integers(0, 3))
def test_the_placer_and_the_binder_hold_the_same_shares_from_a_pod(
    nominated: list[Nominee], uid: str, priority: int
) -> None:
    view = ClusterView()
    for node in NODES:
        view.apply(topology(node, DEVICES))
        view.apply(status(node))
    for n in nominated:
        view.apply(nominating(n))
    reservations = binder_reservations(nominated)
    names = {f"u{i}": f"default/pod-u{i} (nominated)" for i in range(6)}
    own = (uid, f"default/pod-{uid}")
    for node in NODES:
        before = set(view.index().node(node).allocations)
        with holding_nominated(view.index(), view.nominations.live(NOW), priority, own) as index:
            placer = {
                (names[a.pod_uid], a.index, a.memory_mib, a.cores)
                for a in index.node(node).allocations
                if a not in before
            }
        rooms = reservations.held_from(uid, priority, node, NOW)
        binder = {
            (holder, index, s.memory_mib, s.cores)
            for index, holders in nominated_holders(rooms, node).items()
            for holder, s in holders.items()
        }
        assert placer == binder
        assert set(view.index().node(node).allocations) == before  # the placer's index is left as it was


@settings(max_examples=100, deadline=None)
@given(
    nominated=nominees(("n",)).map(lambda ns: [msgspec.structs.replace(n, devices=()) for n in ns]),
    picks=st.lists(st.integers(0, DEVICES - 1), max_size=DEVICES),
    gpus=st.integers(1, DEVICES),
    priority=st.integers(0, 3),
)
def test_every_pod_the_placer_places_beside_nominated_pods_the_binder_accepts(
    nominated: list[Nominee], picks: list[int], gpus: int, priority: int
) -> None:
    # each nominee gets whole devices none other gets, as the placer's preemption gives them
    taken: set[int] = set()
    given_out = []
    for n, index in zip(nominated, picks, strict=False):
        if index in taken:
            continue
        taken.add(index)
        given_out.append(msgspec.structs.replace(n, devices=(DeviceAssignment(index=index),)))
    decider = Decider(engine=Engine())
    decider.on_event(topology("n", DEVICES))
    decider.on_event(status("n", allocatable={"nvidia.com/gpu": str(DEVICES), "cpu": "64", "pods": "110"}))
    for n in given_out:
        decider.on_event(nominating(n), now=NOW)
    pod = PendingPodEvent(
        uid="pod",
        namespace="default",
        name="pod",
        resource_version="1",
        requests={"nvidia.com/gpu": str(gpus)},
        priority=priority,
    )
    placement = decider.on_pending(pod, now=NOW).placement
    assert placement is not None
    reservations = binder_reservations(given_out)
    rooms = reservations.held_from("pod", priority, "n", NOW)
    ledger = DeviceLedger()
    ledger.set_node_devices("n", topology("n", DEVICES).devices)
    held = nominated_holders(rooms, "n")
    free = DEVICES - len(held)
    if placement.outcome is PlacementOutcome.PLACED:
        assert ledger.collisions("pod", "n", placement.devices, held=held) == ()
    else:  # the placer finds no room exactly when the binder would refuse every choice
        assert gpus > free
