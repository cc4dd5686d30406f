"""The placer's view of the cluster, rebuilt from the topics; pure and synchronous.

The view is fed every event of the state topics (topology.nodes, usage.devices,
nodes.status, topology.network, pods.lifecycle; for DRA resources.slices and
resources.claims) and of placements and bindings,
in whatever order the partitions deliver them, and turns them into the engine's
Snapshot.

Who holds which device is derived per pod from everything known about it, so
the result does not depend on the order events arrive in, and a duplicate
changes nothing:

- the cluster said the pod was deleted  -> it holds nothing, whatever else is known;
- the cluster said the pod is bound     -> it holds what the cluster says (bound);
- otherwise every PLACED decision for it that the binder has not answered with
  CONFLICT or FAILED is an assumed holding (BOUND confirms it; the lifecycle
  event that follows makes it a bound holding).

Decisions are keyed by decision_id, so replaying the placements topic after a
restart rebuilds exactly the assumptions that were outstanding.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from decimal import Decimal

import msgspec

import engine
from engine import Allocation, ClusterIndex, NodeState, Snapshot
from engine.cluster.network import NetworkTree, build_tree, from_event
from schemas import topics
from schemas.enforcement import Enforcement, node_enforcement
from schemas.events import (
    AllocatedClaimEvent,
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    DeviceUsageEvent,
    Event,
    HyperNodeEvent,
    LifecyclePhase,
    NodeStatusEvent,
    NodeTopologyEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
    ResourceSliceEvent,
    TopologyLevelsEvent,
)
from schemas.quantity import QuantityError, parse_quantity
from services.placer.claims import AllocatedClaims

# Deleted pods remembered (uid only) so that late events about them change nothing; the oldest go first.
DELETED_BOUND = 200_000

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


NO_CHANGE = ViewChange()


class _PodFacts:
    """Everything the view has heard about one pod (mutable, private)."""

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


class ClusterView:
    """Nodes, network tree and device holdings, as the topics describe them.

    The engine's cluster index is kept current node by node: an event marks the nodes it
    touches, and `index()` rebuilds only those, so a decision never walks every node or pod.
    """

    def __init__(self, *, cpu_in_index: bool = False) -> None:
        """`cpu_in_index`: the index reads each node's CPU (the fragmentation policy weighs it)."""
        self._topologies: dict[str, NodeTopologyEvent] = {}
        self._usage: dict[str, DeviceUsageEvent] = {}
        self._statuses: dict[str, NodeStatusEvent] = {}
        self._hypernodes: dict[str, HyperNodeEvent] = {}
        self._levels: dict[str, TopologyLevelsEvent] = {}
        self._slices: dict[str, ResourceSliceEvent] = {}  # DRA ResourceSlices by name
        self._allocated = AllocatedClaims()  # every allocated DRA ResourceClaim, of any scheduler
        self._pods: dict[str, _PodFacts] = {}
        self._deleted: OrderedDict[str, None] = OrderedDict()  # uids of deleted pods, bounded
        self._on_node: dict[str, set[str]] = {}  # node -> uids of pods holding devices or resources there
        self._index: ClusterIndex = engine.new_index(cpu=cpu_in_index)
        self._dirty: set[str] = set()
        self._tree: tuple[tuple[int, int], NetworkTree] | None = None
        self._labels_epoch = 0  # grows when a node's labels (or the node set) change: the tree depends on them
        self._network_epoch = 0  # grows when a hypernode or a topology level changes
        self.default_enforcement: Enforcement | None = None  # TOPOPLACE_ENFORCEMENT (None: auto)

    # --- applying events -------------------------------------------------------------------

    def apply(self, event: Event) -> ViewChange:
        """Apply one decoded event of any topic the placer follows."""
        match event:
            case NodeTopologyEvent():
                return self._apply_topology(event)
            case DeviceUsageEvent():
                return self._apply_usage(event)
            case NodeStatusEvent():
                return self._apply_status(event)
            case HyperNodeEvent():
                return self._apply_hypernode(event)
            case TopologyLevelsEvent():
                return self._apply_levels(event)
            case ResourceSliceEvent():
                return self._apply_slice(event)
            case AllocatedClaimEvent():
                return ViewChange(capacity_grew=self._allocated.apply(event))
            case PodLifecycleEvent():
                return self._apply_lifecycle(event)
            case PlacementEvent():
                return self._apply_placement(event)
            case BindingEvent():
                return self._apply_binding(event)
        return NO_CHANGE  # pods.pending and anything else carry no cluster state

    def apply_tombstone(self, topic: str, key: str) -> ViewChange:
        """A compacted topic's tombstone (value None): the key is gone."""
        if topic == topics.TOPOLOGY_NODES.name:
            if self._topologies.pop(key, None) is not None:
                self._labels_epoch += 1
            self._dirty.add(key)
        elif topic == topics.USAGE_DEVICES.name:
            self._usage.pop(key, None)
            self._dirty.add(key)
        elif topic == topics.NODES_STATUS.name:
            if self._statuses.pop(key, None) is not None:
                self._labels_epoch += 1
            self._dirty.add(key)
        elif topic == topics.TOPOLOGY_NETWORK.name:
            if self._hypernodes.pop(key, None) is not None:
                self._network_epoch += 1
        elif topic == topics.TOPOLOGY_LEVELS.name:
            if self._levels.pop(key, None) is not None:
                self._network_epoch += 1
        elif topic == topics.RESOURCE_SLICES.name:
            self._slices.pop(key, None)
        elif topic == topics.RESOURCE_CLAIMS.name:
            return ViewChange(capacity_grew=self._allocated.remove(key))
        elif topic == topics.PODS_LIFECYCLE.name:
            # The pod's record was compacted away after its deletion: treat as deleted.
            return self._apply_lifecycle(
                PodLifecycleEvent(uid=key, namespace="", name="", phase=LifecyclePhase.DELETED)
            )
        return NO_CHANGE

    def assume(self, placement: PlacementEvent) -> None:
        """Record our own PLACED decision at once, before the placements topic echoes it."""
        self._apply_placement(placement)

    def retract(self, placement: PlacementEvent) -> None:
        """Take back our own decision that could not be published (nobody else saw it)."""
        facts = self._pods.get(placement.uid)
        if facts is not None and placement.decision_id not in facts.outcomes:
            before = facts.nodes()
            facts.placements.pop(placement.decision_id, None)
            self._moved(placement.uid, facts, before)

    def _apply_topology(self, event: NodeTopologyEvent) -> ViewChange:
        before = self._topologies.get(event.node)
        self._topologies[event.node] = event
        self._dirty.add(event.node)
        if before is None:
            self._labels_epoch += 1
        grew = before is None or (before.devices, before.links) != (event.devices, event.links)
        return ViewChange(capacity_grew=grew)

    def _apply_usage(self, event: DeviceUsageEvent) -> ViewChange:
        before = self._unhealthy(event.node)
        self._usage[event.node] = event
        after = self._unhealthy(event.node)
        if before != after:
            self._dirty.add(event.node)
        # Only a device coming back to health makes room; utilisation ticks do not.
        return ViewChange(capacity_grew=bool(before - after))

    def _apply_status(self, event: NodeStatusEvent) -> ViewChange:
        before = self._statuses.get(event.node)
        self._statuses[event.node] = event
        self._dirty.add(event.node)
        was_open = before is not None and self._status_problem(before) is None
        now_open = self._status_problem(event) is None
        labels_changed = before is None or (before.labels, before.annotations) != (event.labels, event.annotations)
        if before is None or before.labels != event.labels or before.deleted != event.deleted:
            self._labels_epoch += 1
        relaxed = before is not None and (before.taints != event.taints or before.allocatable != event.allocatable)
        return ViewChange(capacity_grew=now_open and (not was_open or labels_changed or relaxed))

    def _apply_hypernode(self, event: HyperNodeEvent) -> ViewChange:
        if event.deleted:
            if self._hypernodes.pop(event.name, None) is not None:
                self._network_epoch += 1
            return NO_CHANGE
        before = self._hypernodes.get(event.name)
        self._hypernodes[event.name] = event
        if before != event:
            self._network_epoch += 1
        return ViewChange(capacity_grew=before != event)

    def _apply_levels(self, event: TopologyLevelsEvent) -> ViewChange:
        before = self._levels.pop(event.name, None)
        if not event.deleted:
            self._levels[event.name] = event
        if before != (None if event.deleted else event):
            self._network_epoch += 1
        return ViewChange(capacity_grew=not event.deleted and before != event)

    def _apply_slice(self, event: ResourceSliceEvent) -> ViewChange:
        before = self._slices.pop(event.name, None)
        if not event.deleted:
            self._slices[event.name] = event
        return ViewChange(capacity_grew=not event.deleted and before != event)

    def slices(self) -> tuple[ResourceSliceEvent, ...]:
        """Every node-local DRA ResourceSlice known, by name."""
        return tuple(self._slices[name] for name in sorted(self._slices))

    def allocated_claims(self) -> AllocatedClaims:
        """Every allocated DRA ResourceClaim known (ours and other schedulers'), by the devices they take."""
        return self._allocated

    def _apply_lifecycle(self, event: PodLifecycleEvent) -> ViewChange:
        if event.uid in self._deleted:
            return NO_CHANGE  # deletion is final; a late "bound" is an older state
        facts = self._facts(event.uid)
        held_before = facts.holdings()
        before = facts.nodes()
        if event.phase is LifecyclePhase.DELETED:
            facts.lifecycle = event
            self._moved(event.uid, facts, before)
            self._forget(event.uid)
            freed = bool(held_before) or bool(before)
            devices = _devices_freed(held_before, [])
            return ViewChange(capacity_grew=freed, devices_freed=devices, settled=(event.uid,))
        facts.lifecycle = event
        self._moved(event.uid, facts, before)
        freed = _devices_freed(held_before, facts.holdings())
        return ViewChange(capacity_grew=freed, devices_freed=freed, settled=(event.uid,))

    def _apply_placement(self, event: PlacementEvent) -> ViewChange:
        if event.outcome is not PlacementOutcome.PLACED or event.uid in self._deleted:
            return NO_CHANGE
        facts = self._facts(event.uid)
        if event.decision_id in facts.placements:
            return NO_CHANGE
        before = facts.nodes()
        facts.placements[event.decision_id] = event
        self._moved(event.uid, facts, before)
        return NO_CHANGE

    def _apply_binding(self, event: BindingEvent) -> ViewChange:
        if event.outcome not in (BindingOutcome.BOUND, *DROPPING_OUTCOMES) or event.uid in self._deleted:
            return NO_CHANGE
        facts = self._facts(event.uid)
        if event.decision_id in facts.outcomes:
            return NO_CHANGE  # a duplicate answer
        if event.outcome is BindingOutcome.BOUND:
            facts.outcomes[event.decision_id] = event.outcome
            return NO_CHANGE  # confirms a holding: nothing freed
        held_before = facts.holdings()
        before = facts.nodes()
        facts.outcomes[event.decision_id] = event.outcome
        self._moved(event.uid, facts, before)
        freed = _devices_freed(held_before, facts.holdings())
        settled = facts.deleted or facts.lifecycle is not None
        return ViewChange(capacity_grew=freed, devices_freed=freed, dropped=() if settled else (event,))

    def _facts(self, uid: str) -> _PodFacts:
        facts = self._pods.get(uid)
        if facts is None:
            facts = self._pods[uid] = _PodFacts()
        return facts

    def _moved(self, uid: str, facts: _PodFacts, before: set[str]) -> None:
        """The pod's nodes changed (or what it holds on them): mark them for a rebuild."""
        after = facts.nodes()
        for node in before - after:
            on = self._on_node.get(node)
            if on is not None:
                on.discard(uid)
                if not on:
                    del self._on_node[node]
        for node in after:
            self._on_node.setdefault(node, set()).add(uid)
        self._dirty.update(before)
        self._dirty.update(after)

    def _forget(self, uid: str) -> None:
        """A deleted pod: keep only its uid (bounded), so memory does not grow with every pod ever seen."""
        self._pods.pop(uid, None)
        self._deleted[uid] = None
        while len(self._deleted) > DELETED_BOUND:
            self._deleted.popitem(last=False)

    # --- reading ---------------------------------------------------------------------------

    def holdings_of(self, uid: str) -> list[Holding]:
        facts = self._pods.get(uid)
        return facts.holdings() if facts is not None else []

    def is_deleted(self, uid: str) -> bool:
        return uid in self._deleted

    def running_node(self, uid: str) -> str:
        """The node the cluster reports the pod bound to ("" when not bound)."""
        facts = self._pods.get(uid)
        if facts is None or facts.lifecycle is None or facts.deleted:
            return ""
        return facts.lifecycle.node

    def dropped_decisions(self, uid: str) -> int:
        """How many decisions for this pod the binder rejected (CONFLICT or FAILED)."""
        facts = self._pods.get(uid)
        if facts is None:
            return 0
        return sum(1 for outcome in facts.outcomes.values() if outcome in DROPPING_OUTCOMES)

    def holdings(self) -> list[Holding]:
        return [h for facts in self._pods.values() for h in facts.holdings()]

    def node_problem(self, node: str) -> str | None:
        """Why the node cannot take pods now, in words; None when it can."""
        if node not in self._topologies:
            return "no device topology reported for the node yet"
        status = self._statuses.get(node)
        if status is None:
            return "no status reported for the node yet"
        return self._status_problem(status)

    def enforcement_of(self, node: str) -> Enforcement:
        """How the node enforces a device choice, from its labels and annotations (schemas/enforcement.py)."""
        status = self._statuses.get(node)
        labels = status.labels if status is not None else {}
        annotations = status.annotations if status is not None else {}
        return node_enforcement(labels, annotations, self.default_enforcement)[0]

    def node_names(self) -> list[str]:
        return sorted(self._topologies)

    def nodes_without_status(self) -> list[str]:
        """Nodes with a topology but no status yet: offered to the engine as not ready."""
        return [n for n in sorted(self._topologies) if n not in self._statuses]

    def index(self) -> ClusterIndex:
        """The engine's cluster index, brought up to date with every event applied so far."""
        for name in sorted(self._dirty):
            if name in self._topologies:
                self._index.upsert(self._node_state(name))
            else:
                self._index.remove(name)
        self._dirty.clear()
        return self._index

    def network_tree(self) -> NetworkTree:
        """The network tree of the hypernodes, topology levels and node labels (rebuilt when they change)."""
        key = (self._labels_epoch, self._network_epoch)
        if self._tree is None or self._tree[0] != key:
            index = self.index()
            labels = {node.name: node.labels for node in index.nodes()}
            hypernodes = [from_event(self._hypernodes[name]) for name in sorted(self._hypernodes)]
            self._tree = (key, build_tree(hypernodes, labels, topology_levels=self.topology_levels()).tree)
        return self._tree[1]

    def topology_levels(self) -> tuple[str, ...]:
        """The label levels of the first Topology by name (Kueue / KAI); empty without one."""
        for name in sorted(self._levels):
            return self._levels[name].levels
        return ()

    def snapshot(self) -> Snapshot:
        """The engine's input: every node with a topology, and who holds its devices."""
        index = self.index()
        hypernodes = tuple(from_event(self._hypernodes[name]) for name in sorted(self._hypernodes))
        return Snapshot(nodes=tuple(index.nodes()), hypernodes=hypernodes, topology_levels=self.topology_levels())

    def sizes(self) -> dict[str, int]:
        """Counts for the metrics: nodes, schedulable nodes, hypernodes, holdings by state."""
        counts = {
            "nodes": len(self._topologies),
            "schedulable_nodes": sum(1 for n in self._topologies if self.node_problem(n) is None),
            "hypernodes": len(self._hypernodes),
            "pods_known": len(self._pods),
            "pods_deleted_remembered": len(self._deleted),
        }
        for state in HoldingState:
            counts[f"pods_{state.value}"] = 0
        for holding in self.holdings():
            counts[f"pods_{holding.state.value}"] += 1
        return counts

    def _node_state(self, name: str) -> NodeState:
        topology = self._topologies[name]
        status = self._statuses.get(name)
        unhealthy = self._unhealthy(name)
        devices = topology.devices
        if unhealthy:
            devices = tuple(
                msgspec.structs.replace(d, healthy=False) if d.index in unhealthy else d for d in topology.devices
            )
        allocations: list[Allocation] = []
        requested: dict[str, Decimal] = {}
        pods = 0
        for uid in sorted(self._on_node.get(name, ())):
            facts = self._pods.get(uid)
            if facts is None:
                continue
            for holding in facts.holdings():
                if holding.node != name:
                    continue
                allocations.extend(
                    Allocation(
                        pod_uid=holding.pod_uid,
                        index=device.index,
                        memory_mib=device.memory_mib,
                        cores=device.cores,
                        qos=holding.qos,
                        app_class=holding.app_class,
                    )
                    for device in holding.devices
                )
            where = facts.requests_on()
            if where is not None and where[0] == name:
                pods += 1
                _add_requests(requested, where[1])
        allocatable = dict(status.allocatable) if status is not None and status.allocatable else None
        return NodeState(
            name=name,
            machine_type=topology.machine_type,
            devices=devices,
            links=topology.links,
            labels=dict(status.labels) if status is not None else {},
            annotations=dict(status.annotations) if status is not None else {},
            taints=status.taints if status is not None else (),
            # Without its status we know neither cordon nor readiness: not a candidate.
            ready=status is not None and status.ready and not status.deleted,
            unschedulable=status is not None and status.unschedulable,
            allocatable=allocatable,
            requested={k: _quantity_text(v) for k, v in sorted(requested.items())},
            pods=pods,
            allocations=tuple(allocations),
        )

    def _unhealthy(self, node: str) -> set[int]:
        """Device indices the latest usage report calls unhealthy (usage overrides topology)."""
        usage = self._usage.get(node)
        topology = self._topologies.get(node)
        unhealthy = {d.index for d in topology.devices if not d.healthy} if topology else set()
        if usage is not None:
            for device in usage.devices:
                if device.healthy:
                    unhealthy.discard(device.index)
                else:
                    unhealthy.add(device.index)
        return unhealthy

    @staticmethod
    def _status_problem(status: NodeStatusEvent) -> str | None:
        if status.deleted:
            return "the node was deleted"
        if not status.ready:
            return "the node is not ready"
        if status.unschedulable:
            return "the node is cordoned"
        return None


def _add_requests(into: dict[str, Decimal], requests: dict[str, str]) -> None:
    for resource, text in requests.items():
        try:
            into[resource] = into.get(resource, Decimal(0)) + parse_quantity(text)
        except QuantityError:
            continue  # the pod's own decision reported it; a node's sum skips what cannot be read


def _quantity_text(value: Decimal) -> str:
    return format(value.normalize(), "f") if value != value.to_integral_value() else str(int(value))


def _devices_freed(before: list[Holding], after: list[Holding]) -> bool:
    def shares(holdings: list[Holding]) -> set[tuple[str, int, int, int]]:
        return {(h.node, d.index, d.memory_mib, d.cores) for h in holdings for d in h.devices}

    return bool(shares(before) - shares(after))
