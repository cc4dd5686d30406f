"""The placer's and the binder's answers for one pod: placements, bindings."""

from __future__ import annotations

import enum

import msgspec

from schemas.dra import ClaimAllocation
from schemas.enforcement import Enforcement
from schemas.events.base import Event
from schemas.events.pods import DeviceAssignment, GangRef
from schemas.kube import HostPort, PodAffinities

# --- placements (key = node) ----------------------------------------------------------------


class PlacementOutcome(enum.StrEnum):
    PLACED = "placed"
    UNSCHEDULABLE = "unschedulable"


class Alternative(msgspec.Struct, frozen=True, kw_only=True):
    """A node that could also take the pod, and why the chosen node beat it."""

    node: str
    score: float
    reason: str


class PreemptionVictim(msgspec.Struct, frozen=True, kw_only=True):
    """A running pod to evict so that a higher-priority pending pod fits on the nominated node."""

    uid: str
    namespace: str
    name: str
    priority: int = 0
    violates_budget: bool = False  # evicting it goes past a PodDisruptionBudget (kube allows it, last)


MAX_ALTERNATIVES = 3  # runners-up a placement carries: enough to explain, small on the wire


class PlacementEvent(Event, frozen=True, kw_only=True):
    """The placer's decision for one pending pod."""

    decision_id: str
    uid: str
    namespace: str
    name: str
    pod_resource_version: str
    outcome: PlacementOutcome
    node: str = ""
    devices: tuple[DeviceAssignment, ...] = ()
    score: float = 0.0
    score_parts: dict[str, float] = {}
    reason: str = ""  # why it is unschedulable, in words a user understands
    candidates_considered: int = 0
    gang: GangRef | None = None
    qos: str = ""  # sharing class of the devices (MetaX sGPU QoS policy)
    app_class: str = ""  # MetaX online/offline class
    requests: dict[str, str] = {}  # the pod's effective requests, held on the node while assumed
    # The pod's labels and pod (anti-)affinity, counted on the node while assumed (InterPodAffinity,
    # PodTopologySpread): the next replica decided sees this one before the cluster reports it bound.
    labels: dict[str, str] = {}
    affinities: PodAffinities | None = None
    host_ports: tuple[HostPort, ...] = ()  # the host ports it takes, held on the node while assumed (NodePorts)
    decided_at: float = 0.0
    claims: tuple[ClaimAllocation, ...] = ()  # DRA: the devices chosen for each of the pod's claims
    # How the node makes the device choice stick (schemas/enforcement.py): the binder writes
    # HAMi's annotations for `hami`; with a plain device plugin the devices are advice.
    enforcement: Enforcement = Enforcement.DEVICE_PLUGIN
    # The best few other nodes that fit, best first, and why they lost (at most MAX_ALTERNATIVES).
    alternatives: tuple[Alternative, ...] = ()
    # Preemption (outcome UNSCHEDULABLE: the pod fits nowhere now): the node it is nominated to once
    # `victims` are gone, and its priority, which the freed room is held against. A nomination
    # with no victims says the pod still waits for the victims of an earlier one.
    nominated_node: str = ""
    victims: tuple[PreemptionVictim, ...] = ()
    priority: int = 0
    nominated_devices: tuple[DeviceAssignment, ...] = ()  # the devices it gets there once they are gone


# --- bindings (key = pod uid) ---------------------------------------------------------------


class BindingOutcome(enum.StrEnum):
    BOUND = "bound"
    CONFLICT = "conflict"  # the pod is bound elsewhere, or the devices are taken
    FAILED = "failed"  # gave up after retries, or the pod is gone
    UNSCHEDULABLE = "unschedulable"  # the placer found no room; reported on the pod


class BindingEvent(Event, frozen=True, kw_only=True):
    """What the binder did with one placement."""

    decision_id: str
    uid: str
    namespace: str
    name: str
    outcome: BindingOutcome
    node: str = ""
    devices: tuple[DeviceAssignment, ...] = ()
    reason: str = ""
    attempts: int = 1
    finished_at: float = 0.0
