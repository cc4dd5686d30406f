"""Who holds which device, derived per pod from everything the placer's view heard about it.

A pod's facts (its lifecycle in the cluster, every PLACED decision for it, the binder's answers)
give its holdings in an order-independent way; see view.py for the rules.
"""

from __future__ import annotations

import enum

import msgspec

from engine.core.model import PlacedPod
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    LifecyclePhase,
    PlacementEvent,
    PodLifecycleEvent,
)
from schemas.kube import HostPort

# Outcomes after which a decision no longer holds its devices.
DROPPING_OUTCOMES = frozenset({BindingOutcome.CONFLICT, BindingOutcome.FAILED})


class HoldingState(enum.StrEnum):
    ASSUMED = "assumed"  # decided (by us or another replica), the binder has not confirmed
    CONFIRMED = "confirmed"  # the binder reported BOUND; the cluster has not echoed it yet
    BOUND = "bound"  # the cluster reports the pod bound to the node


class Holding(msgspec.Struct, frozen=True, kw_only=True):
    """The devices one pod holds on one node, and why the view believes it."""

    pod_uid: str
    node: str
    devices: tuple[DeviceAssignment, ...]
    state: HoldingState
    qos: str = ""
    app_class: str = ""
    decision: PlacementEvent | None = None  # the decision behind it, when known


class ViewChange(msgspec.Struct, frozen=True, kw_only=True):
    """What one applied event changed that the decider must react to."""

    capacity_grew: bool = False  # something became free or schedulable: retry parked pods
    devices_freed: bool = False  # a pod's device shares were released (not only its cpu, memory, slot)
    dropped: tuple[BindingEvent, ...] = ()  # decisions the binder could not apply
    settled: tuple[str, ...] = ()  # pod uids now bound or deleted in the cluster
    pods_moved: bool = False  # a pod came to, left or changed (labels, pod affinity) on a node: affinity, spread
    # A pod decided onto a node (assumed or confirmed) is now reported there by the cluster: a preemption
    # that waited for the node's pods to be known may choose its victims.
    reported: bool = False


NO_CHANGE = ViewChange()


class PodFacts:
    """Everything the view has heard about one pod (mutable, the view's own)."""

    __slots__ = ("lifecycle", "outcomes", "placements")

    def __init__(self) -> None:
        self.lifecycle: PodLifecycleEvent | None = None
        self.placements: dict[str, PlacementEvent] = {}  # decision_id -> PLACED decision
        self.outcomes: dict[str, BindingOutcome] = {}  # decision_id -> binder's answer

    @property
    def deleted(self) -> bool:
        return self.lifecycle is not None and self.lifecycle.phase is LifecyclePhase.DELETED

    def outstanding(self) -> list[PlacementEvent]:
        """PLACED decisions the binder has not rejected, in a stable order."""
        return [
            placement
            for decision_id, placement in sorted(self.placements.items())
            if self.outcomes.get(decision_id) not in DROPPING_OUTCOMES
        ]

    def requests_on(self) -> tuple[str, dict[str, str]] | None:
        """(node, requests) the pod counts against, bound or assumed; None when it is on no node."""
        if self.deleted:
            return None
        if self.lifecycle is not None:
            return (self.lifecycle.node, self.lifecycle.requests) if self.lifecycle.node else None
        outstanding = self.outstanding()
        return (outstanding[0].node, outstanding[0].requests) if outstanding else None

    def ports_on(self) -> tuple[str, tuple[HostPort, ...]] | None:
        """(node, the host ports the pod takes there), bound or assumed, as `requests_on`; None: on no node."""
        if self.deleted:
            return None
        if self.lifecycle is not None:
            return (self.lifecycle.node, self.lifecycle.host_ports) if self.lifecycle.node else None
        outstanding = self.outstanding()
        return (outstanding[0].node, outstanding[0].host_ports) if outstanding else None

    def placed_on(self) -> tuple[str, PlacedPod] | None:
        """(node, the pod as pod affinity and spread read it) where it is bound or assumed; None: on no node.

        Every scheduler's bound pods count, and our own decisions before the cluster reports them
        bound, so the next replica decided sees this one."""
        if self.deleted:
            return None
        if self.lifecycle is not None:
            bound = self.lifecycle
            if not bound.node:
                return None
            pod = PlacedPod(
                uid=bound.uid,
                namespace=bound.namespace,
                labels=bound.labels,
                affinities=bound.affinities,
                terminating=bound.terminating,
            )
            return bound.node, pod
        outstanding = self.outstanding()
        if not outstanding:
            return None
        p = outstanding[0]
        return p.node, PlacedPod(uid=p.uid, namespace=p.namespace, labels=p.labels, affinities=p.affinities)

    def nodes(self) -> set[str]:
        """Every node the pod holds devices or resources on."""
        found = {h.node for h in self.holdings()}
        where = self.requests_on()
        if where is not None:
            found.add(where[0])
        return found

    def holdings(self) -> list[Holding]:
        if self.deleted:
            return []
        if self.lifecycle is not None and not self.lifecycle.ours:
            return []  # another scheduler's pod: its resources count, its devices are the node's business
        if self.lifecycle is not None:  # bound: the cluster is the truth
            bound = self.lifecycle
            devices = bound.devices
            decision = next((p for p in self.placements.values() if p.node == bound.node), None)
            if not devices and decision is not None:
                # The watcher saw the binding before it could read our annotation:
                # keep the decided devices rather than free them.
                devices = decision.devices
            return [
                Holding(
                    pod_uid=bound.uid,
                    node=bound.node,
                    devices=devices,
                    state=HoldingState.BOUND,
                    qos=bound.qos or (decision.qos if decision else ""),
                    app_class=bound.app_class or (decision.app_class if decision else ""),
                    decision=decision,
                )
            ]
        # Several outstanding decisions for one pod happen only when two replicas
        # raced on a redelivered pending event; holding all of them is the safe side.
        return [
            Holding(
                pod_uid=p.uid,
                node=p.node,
                devices=p.devices,
                state=(
                    HoldingState.CONFIRMED
                    if self.outcomes.get(p.decision_id) is BindingOutcome.BOUND
                    else HoldingState.ASSUMED
                ),
                qos=p.qos,
                app_class=p.app_class,
                decision=p,
            )
            for p in self.outstanding()
        ]


def devices_freed(before: list[Holding], after: list[Holding]) -> bool:
    def shares(holdings: list[Holding]) -> set[tuple[str, int, int, int]]:
        return {(h.node, d.index, d.memory_mib, d.cores) for h in holdings for d in h.devices}

    return bool(shares(before) - shares(after))
