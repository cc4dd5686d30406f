"""ClusterView: events in any order -> the engine's snapshot and who holds which device."""

from __future__ import annotations

import itertools

from placer_builders import (
    binding,
    held_devices,
    lifecycle,
    placed,
    status,
    topology,
    usage,
)

from schemas import topics
from schemas.events import (
    BindingOutcome,
    HyperNodeEvent,
    HyperNodeMember,
    LifecyclePhase,
    MemberKind,
    PlacementEvent,
    PlacementOutcome,
)
from services.placer.view import ClusterView, HoldingState


def _view(*events: object) -> ClusterView:
    view = ClusterView()
    for event in events:
        view.apply(event)  # type: ignore[arg-type]
    return view


def _node(view: ClusterView, name: str):  # type: ignore[no-untyped-def]
    return next(n for n in view.snapshot().nodes if n.name == name)


# --- nodes ---------------------------------------------------------------------------------


def test_only_nodes_with_a_topology_are_offered() -> None:
    view = _view(status("a"), topology("b"), status("b"))
    assert [n.name for n in view.snapshot().nodes] == ["b"]


def test_node_without_status_is_offered_as_not_ready_with_the_reason() -> None:
    view = _view(topology("a"))
    assert _node(view, "a").ready is False
    assert view.node_problem("a") == "no status reported for the node yet"
    assert view.nodes_without_status() == ["a"]
    view.apply(status("a"))
    assert _node(view, "a").ready is True
    assert view.node_problem("a") is None
    assert view.nodes_without_status() == []


def test_status_fields_reach_the_snapshot() -> None:
    view = _view(
        topology("a"),
        status("a", labels={"zone": "z1"}, annotations={"x": "y"}, unschedulable=True),
    )
    node = _node(view, "a")
    assert node.labels == {"zone": "z1"}
    assert node.annotations == {"x": "y"}
    assert node.unschedulable is True
    assert view.node_problem("a") == "the node is cordoned"


def test_deleted_or_not_ready_node_is_not_ready() -> None:
    view = _view(
        topology("a"),
        status("a", deleted=True),
        topology("b"),
        status("b", ready=False),
    )
    assert _node(view, "a").ready is False
    assert _node(view, "b").ready is False
    assert view.node_problem("a") == "the node was deleted"
    assert view.node_problem("b") == "the node is not ready"


def test_usage_health_overrides_the_topology() -> None:
    view = _view(topology("a"), status("a"), usage("a", unhealthy=(1, 3)))
    assert [d.healthy for d in _node(view, "a").devices] == [True, False, True, False]
    view.apply(usage("a"))  # all healthy again
    assert all(d.healthy for d in _node(view, "a").devices)


def test_tombstones_remove_node_facts() -> None:
    view = _view(topology("a"), status("a"), usage("a", unhealthy=(0,)))
    view.apply_tombstone(topics.USAGE_DEVICES.name, "a")
    assert _node(view, "a").devices[0].healthy is True
    view.apply_tombstone(topics.NODES_STATUS.name, "a")
    assert view.node_problem("a") == "no status reported for the node yet"
    view.apply_tombstone(topics.TOPOLOGY_NODES.name, "a")
    assert view.snapshot().nodes == ()


def test_hypernodes_are_kept_until_deleted_or_tombstoned() -> None:
    tor = HyperNodeEvent(name="tor-1", tier=1, members=(HyperNodeMember(kind=MemberKind.NODE, name="a"),))
    spine = HyperNodeEvent(
        name="spine",
        tier=2,
        members=(HyperNodeMember(kind=MemberKind.HYPERNODE, name="tor-1"),),
    )
    view = _view(tor, spine)
    assert [h.name for h in view.snapshot().hypernodes] == ["spine", "tor-1"]
    view.apply(HyperNodeEvent(name="tor-1", tier=1, members=(), deleted=True))
    assert [h.name for h in view.snapshot().hypernodes] == ["spine"]
    view.apply_tombstone(topics.TOPOLOGY_NETWORK.name, "spine")
    assert view.snapshot().hypernodes == ()


# --- holdings ------------------------------------------------------------------------------


def test_lifecycle_bound_holds_devices_and_deleted_frees_them() -> None:
    view = _view(topology("a"), status("a"))
    change = view.apply(lifecycle("p", LifecyclePhase.BOUND, "a", (0, 2)))
    assert change.settled == ("p",)
    assert held_devices(view.snapshot())["a"] == [("p", 0), ("p", 2)]
    assert [h.state for h in view.holdings()] == [HoldingState.BOUND]
    change = view.apply(lifecycle("p", LifecyclePhase.DELETED))
    assert change.capacity_grew is True
    assert held_devices(view.snapshot())["a"] == []


def test_placement_is_assumed_then_confirmed_and_a_duplicate_counts_once() -> None:
    decision = placed("p", "a", (1,))
    view = _view(topology("a"), status("a"), decision, decision)
    assert held_devices(view.snapshot())["a"] == [("p", 1)]
    assert view.holdings_of("p")[0].state is HoldingState.ASSUMED
    view.apply(binding(decision, BindingOutcome.BOUND))
    view.apply(binding(decision, BindingOutcome.BOUND))
    assert held_devices(view.snapshot())["a"] == [("p", 1)]
    assert view.holdings_of("p")[0].state is HoldingState.CONFIRMED


def test_unschedulable_placement_holds_nothing() -> None:
    view = _view(
        topology("a"),
        PlacementEvent(
            decision_id="x",
            uid="p",
            namespace="d",
            name="n",
            pod_resource_version="1",
            outcome=PlacementOutcome.UNSCHEDULABLE,
            reason="full",
        ),
    )
    assert view.holdings() == []


def test_conflict_or_failure_drops_the_assumption_and_reports_it() -> None:
    for outcome in (BindingOutcome.CONFLICT, BindingOutcome.FAILED):
        decision = placed("p", "a", (0,))
        view = _view(topology("a"), status("a"), decision)
        change = view.apply(binding(decision, outcome))
        assert change.capacity_grew is True
        assert [b.decision_id for b in change.dropped] == [decision.decision_id]
        assert view.holdings() == []
        assert view.dropped_decisions("p") == 1
        assert view.apply(binding(decision, outcome)).dropped == ()  # a duplicate answer


def test_rejection_of_a_bound_pod_is_not_reported_for_replanning() -> None:
    decision = placed("p", "a", (0,))
    view = _view(
        topology("a"),
        status("a"),
        decision,
        lifecycle("p", LifecyclePhase.BOUND, "a", (0,)),
    )
    change = view.apply(binding(decision, BindingOutcome.CONFLICT))
    assert change.dropped == ()
    assert held_devices(view.snapshot())["a"] == [("p", 0)]  # the cluster says it is bound


def test_bound_pod_holds_only_what_the_cluster_says() -> None:
    on_b = placed("p", "b", (3,))
    view = _view(
        topology("a"),
        topology("b"),
        on_b,
        lifecycle("p", LifecyclePhase.BOUND, "a", (1,)),
    )
    assert held_devices(view.snapshot()) == {"a": [("p", 1)], "b": []}


def test_bound_without_devices_keeps_the_decided_ones() -> None:
    decision = placed("p", "a", (2, 3))
    view = _view(topology("a"), decision, lifecycle("p", LifecyclePhase.BOUND, "a", ()))
    assert held_devices(view.snapshot())["a"] == [("p", 2), ("p", 3)]


def test_lifecycle_tombstone_frees_like_a_deletion() -> None:
    view = _view(topology("a"), lifecycle("p", LifecyclePhase.BOUND, "a", (0,)))
    change = view.apply_tombstone(topics.PODS_LIFECYCLE.name, "p")
    assert change.capacity_grew is True
    assert view.is_deleted("p")
    view.apply(placed("p", "a", (0,)))  # a late replay of its decision
    assert view.holdings() == []


def test_holdings_do_not_depend_on_event_order() -> None:
    """Replay delivers partitions in any interleaving; the result must be the same."""
    kept = placed("kept", "a", (0,))
    rejected = placed("rejected", "a", (1,))
    gone = placed("gone", "a", (2,))
    events = [
        kept,
        rejected,
        binding(rejected, BindingOutcome.CONFLICT),
        gone,
        lifecycle("gone", LifecyclePhase.BOUND, "a", (2,)),
        lifecycle("gone", LifecyclePhase.DELETED),
        lifecycle("bound", LifecyclePhase.BOUND, "a", (3,)),
    ]
    # Within one pod, lifecycle events keep their order (one partition): skip orders that break it.
    expected = {"a": [("bound", 3), ("kept", 0)]}
    for order in itertools.permutations(events):
        gone_events = [e for e in order if getattr(e, "phase", None) is not None and e.uid == "gone"]
        if gone_events[0].phase is not LifecyclePhase.BOUND:
            continue
        view = _view(topology("a"), *order)
        assert held_devices(view.snapshot()) == expected, order


def test_capacity_grows_only_when_room_appears() -> None:
    view = _view(topology("a"), status("a"), usage("a"))
    assert view.apply(usage("a")).capacity_grew is False  # a utilisation tick
    assert view.apply(usage("a", unhealthy=(2,))).capacity_grew is False
    assert view.apply(usage("a")).capacity_grew is True  # device 2 healthy again
    assert view.apply(status("a", unschedulable=True)).capacity_grew is False
    assert view.apply(status("a")).capacity_grew is True  # uncordoned
    assert view.apply(status("a")).capacity_grew is False
    assert view.apply(topology("b")).capacity_grew is True  # a new node
    assert view.apply(topology("b")).capacity_grew is False
    view.apply(lifecycle("p", LifecyclePhase.BOUND, "a", (0,)))
    assert view.apply(lifecycle("p", LifecyclePhase.BOUND, "a", (0,))).capacity_grew is False


def test_sizes_count_nodes_and_holdings_by_state() -> None:
    decision = placed("q", "a", (1,))
    view = _view(
        topology("a"),
        status("a"),
        topology("b"),
        lifecycle("p", LifecyclePhase.BOUND, "a", (0,)),
        decision,
    )
    sizes = view.sizes()
    assert sizes["nodes"] == 2
    assert sizes["schedulable_nodes"] == 1
    assert sizes["pods_bound"] == 1
    assert sizes["pods_assumed"] == 1
    assert sizes["pods_confirmed"] == 0


def test_an_unchanged_node_is_the_same_object_in_the_next_snapshot() -> None:
    view = ClusterView()
    for name in ("a", "b"):
        view.apply(topology(name))
        view.apply(status(name))
    first = {n.name: n for n in view.snapshot().nodes}
    again = {n.name: n for n in view.snapshot().nodes}
    assert all(again[name] is first[name] for name in first)

    # A decision on a, a status change on b: both rebuilt, with the change, nothing else reused.
    view.assume(placed("p1", "a", (0,)))
    view.apply(status("b", unschedulable=True))
    after = {n.name: n for n in view.snapshot().nodes}
    assert after["a"] is not first["a"] and [al.index for al in after["a"].allocations] == [0]
    assert after["b"] is not first["b"] and after["b"].unschedulable
    assert view.snapshot().nodes[0] is after["a"]
