"""The placer's view gives the engine what InterPodAffinity and PodTopologySpread read: every scheduler's
bound pods with their labels and pod affinity, our own decisions before the cluster reports them, the
namespaces' labels, and the pending pod's own terms. Decided by the real engine."""

from __future__ import annotations

from typing import Any

import msgspec
from placer_builders import FakeClock, pending, status, topology

from engine import Engine
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    LifecyclePhase,
    NamespaceEvent,
    PendingPodEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from schemas.kube import LabelSelector, PodAffinities, TopologySpreadConstraint
from services.placer.decide import Decider, decide
from services.placer.parking import MAX_BACKOFF_S
from services.placer.requests import pod_request
from services.placer.view import ClusterView

HOSTNAME, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def affinities(raw: dict[str, Any]) -> PodAffinities:
    return msgspec.convert(raw, PodAffinities)


def anti(labels: dict[str, str], key: str = HOSTNAME, **term: Any) -> PodAffinities:
    selector = {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **term}
    return affinities({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [selector]}})


def cluster(*nodes: str, zones: dict[str, str] | None = None) -> ClusterView:
    view = ClusterView()
    for name in nodes:
        view.apply(topology(name, 4))
        labels = {HOSTNAME: name, **({ZONE: zones[name]} if zones else {})}
        view.apply(status(name, labels=labels))
    return view


def web(uid: str, **fields: Any) -> PendingPodEvent:
    return msgspec.structs.replace(pending(uid, 1), labels={"app": "web"}, **fields)


def bound(uid: str, node: str, labels: dict[str, str], **fields: Any) -> PodLifecycleEvent:
    return PodLifecycleEvent(
        uid=uid,
        namespace="default",
        name=uid,
        phase=LifecyclePhase.BOUND,
        node=node,
        labels=labels,
        ours=False,
        **fields,
    )


def placed_node(view: ClusterView, event: PendingPodEvent) -> str | None:
    placement = decide(view, event, engine=Engine()).placement
    assert placement is not None
    return placement.node if placement.outcome is PlacementOutcome.PLACED else None


def test_the_pending_pods_terms_reach_the_engines_request() -> None:
    spread = TopologySpreadConstraint(max_skew=1, topology_key=ZONE, when_unsatisfiable="DoNotSchedule")
    selector = LabelSelector(match_labels={"app": "web"})
    event = web("w", affinities=anti({"app": "web"}), topology_spread_constraints=(spread,))
    event = msgspec.structs.replace(event, default_spread_selector=selector)
    request = pod_request(event)
    assert (request.affinities, request.topology_spread_constraints, request.default_spread_selector) == (
        event.affinities,
        (spread,),
        selector,
    )


def test_replicas_with_required_anti_affinity_land_one_per_node_before_any_is_bound() -> None:
    """Each decision is assumed at once, labels and terms included: the next replica sees it."""
    view = cluster("a", "b", "c")
    nodes = [placed_node(view, web(f"w{i}", affinities=anti({"app": "web"}))) for i in range(4)]
    assert sorted(n for n in nodes[:3] if n) == ["a", "b", "c"]
    assert nodes[3] is None


def test_a_decision_the_binder_rejects_stops_counting() -> None:
    view = cluster("a")
    first = decide(view, web("w0", affinities=anti({"app": "web"})), engine=Engine()).placement
    assert first is not None and first.node == "a"
    assert placed_node(view, web("w1", affinities=anti({"app": "web"}))) is None
    view.apply(
        BindingEvent(
            decision_id=first.decision_id,
            uid=first.uid,
            namespace=first.namespace,
            name=first.name,
            outcome=BindingOutcome.CONFLICT,
            node="a",
        )
    )
    assert placed_node(view, web("w2", affinities=anti({"app": "web"}))) == "a"


def test_another_schedulers_bound_pods_are_avoided_by_anti_affinity() -> None:
    view = cluster("a", "b")
    view.apply(bound("db-0", "a", {"app": "db"}))
    assert placed_node(view, web("w", affinities=anti({"app": "db"}))) == "b"


def test_a_bound_pods_own_anti_affinity_keeps_the_newcomer_away() -> None:
    view = cluster("a", "b")
    view.apply(bound("db-0", "a", {"app": "db"}, affinities=anti({"app": "web"})))
    assert placed_node(view, web("w")) == "b"


def test_a_namespace_selector_reads_the_namespaces_labels() -> None:
    view = cluster("a")
    view.apply(
        PodLifecycleEvent(
            uid="db-0", namespace="ml", name="db-0", phase=LifecyclePhase.BOUND, node="a", labels={"app": "db"}
        )
    )
    term = anti({"app": "db"}, namespaceSelector={"matchLabels": {"team": "ml"}})
    assert placed_node(view, web("w0", affinities=term)) == "a"  # no namespace known with that label
    view.apply(NamespaceEvent(name="ml", labels={"team": "ml"}))
    assert [(n.name, n.labels) for n in view.snapshot().namespaces] == [("ml", {"team": "ml"})]
    assert placed_node(view, web("w1", affinities=term)) is None
    view.apply(NamespaceEvent(name="ml", deleted=True))
    assert placed_node(view, web("w2", affinities=term)) == "a"


def test_a_zone_spread_goes_to_the_emptier_zone_and_terminating_pods_do_not_count() -> None:
    view = cluster("a1", "a2", "b1", zones={"a1": "za", "a2": "za", "b1": "zb"})
    view.apply(bound("w-old", "b1", {"app": "web"}))
    spread = TopologySpreadConstraint(
        max_skew=1,
        topology_key=ZONE,
        when_unsatisfiable="DoNotSchedule",
        label_selector=LabelSelector(match_labels={"app": "web"}),
    )
    assert placed_node(view, web("w1", topology_spread_constraints=(spread,))) in ("a1", "a2")
    # za 1, zb 1: both fit; zb's pod starts terminating: zb is emptier and the next must go there
    view.apply(bound("w-old", "b1", {"app": "web"}, terminating=True))
    assert placed_node(view, web("w2", topology_spread_constraints=(spread,))) == "b1"


def test_the_assumed_placement_carries_the_pods_labels_and_terms() -> None:
    view = cluster("a")
    event = web("w", affinities=anti({"app": "web"}))
    placement = decide(view, event, engine=Engine()).placement
    assert isinstance(placement, PlacementEvent)
    assert (placement.labels, placement.affinities) == ({"app": "web"}, event.affinities)
    (node,) = view.snapshot().nodes
    assert [(p.uid, p.labels) for p in node.running] == [("w", {"app": "web"})]


def test_a_pod_parked_by_anti_affinity_is_placed_when_the_pod_it_avoids_leaves() -> None:
    """kube-scheduler's queueing hint: a pod leaving (or relabelled) helps pods held by pod affinity or spread."""
    decider = Decider(engine=Engine(), clock=FakeClock())
    decider.on_event(topology("a", 4))
    decider.on_event(status("a", labels={HOSTNAME: "a"}))
    decider.on_event(bound("db-0", "a", {"app": "db"}))
    parked = decider.on_pending(web("w", affinities=anti({"app": "db"}))).placement
    assert parked is not None and parked.outcome is PlacementOutcome.UNSCHEDULABLE
    clock = decider.parking.clock
    assert isinstance(clock, FakeClock)
    clock.advance(MAX_BACKOFF_S)
    assert decider.on_event(bound("db-0", "a", {"app": "db"})) == []  # the same pod again: nothing moved
    retried = decider.on_event(bound("db-0", "a", {"app": "cache"}))  # relabelled: no longer avoided
    assert [(r.placement.uid, r.placement.outcome, r.placement.node) for r in retried] == [
        ("w", PlacementOutcome.PLACED, "a")
    ]


def test_a_pod_parked_by_anti_affinity_is_placed_when_that_pod_is_deleted() -> None:
    decider = Decider(engine=Engine(), clock=FakeClock())
    decider.on_event(topology("a", 4))
    decider.on_event(status("a", labels={HOSTNAME: "a"}))
    decider.on_event(bound("db-0", "a", {"app": "db"}))
    parked = decider.on_pending(web("w", affinities=anti({"app": "db"}))).placement
    assert parked is not None and parked.outcome is PlacementOutcome.UNSCHEDULABLE
    clock = decider.parking.clock
    assert isinstance(clock, FakeClock)
    clock.advance(MAX_BACKOFF_S)
    gone = PodLifecycleEvent(uid="db-0", namespace="default", name="db-0", phase=LifecyclePhase.DELETED, ours=False)
    retried = decider.on_event(gone)
    assert [(r.placement.uid, r.placement.node) for r in retried] == [("w", "a")]
