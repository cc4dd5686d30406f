"""The placer's view of the cluster, rebuilt from the topics; pure and synchronous.

The view is fed every event of the state topics (topology.nodes, usage.devices,
nodes.status, topology.network, pods.lifecycle, namespaces, disruption.budgets; for DRA
resources.slices and resources.claims; for volumes storage.claims, storage.volumes,
storage.classes, storage.csinodes: storage_view.py) and of placements and bindings, in
whatever order the partitions deliver them, and turns them into the engine's Snapshot.

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

What each followed topic's event and tombstone do is the table VIEW_TOPICS at the
end; the pods' part lives in pod_ledger.py (facts and holdings in holdings.py), preemption's
(nominations, budgets) in preemption_ledger.py; one node's engine state is built in node_state.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import engine
from engine import ClusterIndex, Snapshot
from engine.cluster.network import NetworkTree, build_tree, from_event
from engine.core.model import Namespace
from engine.node.dra import DeviceClass
from engine.node.dra.model import DeviceTaintRule, ObjectMeta
from schemas import topics
from schemas.enforcement import Enforcement, node_enforcement
from schemas.events import (
    AllocatedClaimEvent,
    DeviceClassEvent,
    DeviceTaintRuleEvent,
    DeviceUsageEvent,
    Event,
    HyperNodeEvent,
    NamespaceEvent,
    NodeStatusEvent,
    NodeTopologyEvent,
    PodLifecycleEvent,
    ResourceSliceEvent,
    TopologyLevelsEvent,
)
from services.placer.claims import AllocatedClaims
from services.placer.dra_allocation import DraCluster
from services.placer.holdings import NO_CHANGE, Holding, HoldingState, ViewChange
from services.placer.node_state import node_state, status_problem, unhealthy_devices
from services.placer.preemption_ledger import PreemptionLedger
from services.placer.storage_view import StorageView

__all__ = ["NO_CHANGE", "ClusterView", "Holding", "HoldingState", "ViewChange"]


class ClusterView(PreemptionLedger):
    """Nodes, network tree and device holdings, as the topics describe them.

    The engine's cluster index is kept current node by node: an event marks the nodes it
    touches, and `index()` rebuilds only those, so a decision never walks every node or pod.
    """

    def __init__(self, *, cpu_in_index: bool = False) -> None:
        """`cpu_in_index`: the index reads each node's CPU (the fragmentation policy weighs it)."""
        super().__init__()  # the pods: who holds what where (pod_ledger.py), nominations and budgets
        self._topologies: dict[str, NodeTopologyEvent] = {}
        self._usage: dict[str, DeviceUsageEvent] = {}
        self._statuses: dict[str, NodeStatusEvent] = {}
        self._hypernodes: dict[str, HyperNodeEvent] = {}
        self._levels: dict[str, TopologyLevelsEvent] = {}
        self._slices: dict[str, ResourceSliceEvent] = {}  # DRA ResourceSlices by name
        self._allocated = AllocatedClaims()  # every allocated DRA ResourceClaim, of any scheduler
        self._namespaces: dict[str, NamespaceEvent] = {}  # their labels: pod affinity's namespaceSelector
        self._namespaces_changed = False
        self._classes: dict[str, DeviceClass] = {}  # DRA DeviceClasses by name
        self._taint_rules: dict[str, DeviceTaintRule] = {}  # DRA DeviceTaintRules by name
        # PersistentVolumeClaims, PersistentVolumes, StorageClasses; the claims of pods placed and not yet bound
        self.storage = StorageView(holds=lambda uid: bool(self.holdings_of(uid)))
        self._index: ClusterIndex = engine.new_index(cpu=cpu_in_index)
        self._tree: tuple[tuple[int, int], NetworkTree] | None = None
        self._labels_epoch = 0  # grows when a node's labels (or the node set) change: the tree depends on them
        self._network_epoch = 0  # grows when a hypernode or a topology level changes
        self.default_enforcement: Enforcement | None = None  # TOPOPLACE_ENFORCEMENT (None: auto)

    # --- applying events -------------------------------------------------------------------

    def apply(self, event: Event) -> ViewChange:
        """Apply one decoded event of any topic the placer follows (VIEW_TOPICS says what each does)."""
        row = _BY_EVENT.get(type(event))
        return row.apply(self, event) if row is not None else NO_CHANGE  # pods.pending and the like: no state

    def apply_tombstone(self, topic: str, key: str) -> ViewChange:
        """A compacted topic's tombstone (value None): the key is gone."""
        row = _BY_TOPIC.get(topic)
        return row.tombstone(self, key) if row is not None and row.tombstone is not None else NO_CHANGE

    def _apply_lifecycle(self, event: PodLifecycleEvent) -> ViewChange:
        self.storage.apply_lifecycle(event)  # the claims pods on nodes mount (ReadWriteOncePod in use)
        return super()._apply_lifecycle(event)

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
        was_open = before is not None and status_problem(before) is None
        now_open = status_problem(event) is None
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

    def _apply_class(self, event: DeviceClassEvent) -> ViewChange:
        before = self._classes.pop(event.name, None)
        if not event.deleted:
            self._classes[event.name] = DeviceClass(metadata=ObjectMeta(name=event.name), spec=event.spec)
        return ViewChange(capacity_grew=not event.deleted and before != self._classes.get(event.name))

    def _class_gone(self, name: str) -> ViewChange:
        self._classes.pop(name, None)
        return ViewChange()

    def _apply_taint_rule(self, event: DeviceTaintRuleEvent) -> ViewChange:
        before = self._taint_rules.pop(event.name, None)
        if not event.deleted and event.spec is not None:
            self._taint_rules[event.name] = DeviceTaintRule(metadata=ObjectMeta(name=event.name), spec=event.spec)
        return ViewChange(capacity_grew=before is not None and event.name not in self._taint_rules)

    def _taint_rule_gone(self, name: str) -> ViewChange:
        return ViewChange(capacity_grew=self._taint_rules.pop(name, None) is not None)

    def dra_cluster(self) -> DraCluster:
        """What the structured allocator reads: slices, classes, every allocation, our claims in flight."""
        assumed = tuple(c for h in self.holdings() if h.decision is not None for c in h.decision.claims)
        return DraCluster(
            slices=self.slices(),
            classes=self._classes,
            taint_rules=tuple(self._taint_rules[n] for n in sorted(self._taint_rules)),
            allocated=self._allocated.events(),
            assumed=assumed,
        )

    def allocated_claims(self) -> AllocatedClaims:
        """Every allocated DRA ResourceClaim known (ours and other schedulers'), by the devices they take."""
        return self._allocated

    # --- tombstones: a compacted topic's key is gone ------------------------------------------------

    def _topology_gone(self, node: str) -> ViewChange:
        if self._topologies.pop(node, None) is not None:
            self._labels_epoch += 1
        self._dirty.add(node)
        return NO_CHANGE

    def _usage_gone(self, node: str) -> ViewChange:
        self._usage.pop(node, None)
        self._dirty.add(node)
        return NO_CHANGE

    def _status_gone(self, node: str) -> ViewChange:
        if self._statuses.pop(node, None) is not None:
            self._labels_epoch += 1
        self._dirty.add(node)
        return NO_CHANGE

    def _hypernode_gone(self, name: str) -> ViewChange:
        if self._hypernodes.pop(name, None) is not None:
            self._network_epoch += 1
        return NO_CHANGE

    def _levels_gone(self, name: str) -> ViewChange:
        if self._levels.pop(name, None) is not None:
            self._network_epoch += 1
        return NO_CHANGE

    def _slice_gone(self, name: str) -> ViewChange:
        self._slices.pop(name, None)
        return NO_CHANGE

    def _apply_namespace(self, event: NamespaceEvent) -> ViewChange:
        before = self._namespaces.pop(event.name, None)
        if not event.deleted:
            self._namespaces[event.name] = event
        self._namespaces_changed = True
        # a namespace's new labels may let a pod's namespaceSelector find (or lose) the pods it wants
        return ViewChange(capacity_grew=before is None or before.labels != event.labels)

    def _namespace_gone(self, name: str) -> ViewChange:
        self._namespaces_changed = self._namespaces.pop(name, None) is not None or self._namespaces_changed
        return NO_CHANGE

    def namespaces(self) -> tuple[Namespace, ...]:
        """Every namespace known, with its labels, by name."""
        return tuple(Namespace(name=n, labels=dict(e.labels)) for n, e in sorted(self._namespaces.items()))

    def _apply_claim(self, event: AllocatedClaimEvent) -> ViewChange:
        return ViewChange(capacity_grew=self._allocated.apply(event))

    def _claim_gone(self, uid: str) -> ViewChange:
        return ViewChange(capacity_grew=self._allocated.remove(uid))

    def node_problem(self, node: str) -> str | None:
        """Why the node cannot take pods now, in words; None when it can."""
        if node not in self._topologies:
            return "no device topology reported for the node yet"
        status = self._statuses.get(node)
        if status is None:
            return "no status reported for the node yet"
        return status_problem(status)

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
        if self._namespaces_changed:
            self._index.pods.set_namespaces(self.namespaces())
            self._namespaces_changed = False
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
        return Snapshot(
            nodes=tuple(index.nodes()),
            hypernodes=hypernodes,
            topology_levels=self.topology_levels(),
            namespaces=self.namespaces(),
        )

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

    def _node_state(self, name: str) -> engine.NodeState:
        topology, status, pods = self._topologies[name], self._statuses.get(name), self._pods_on(name)
        csi = (self.storage.csi_limits(name), self.storage.attached(name))  # NodeVolumeLimits
        return node_state(topology, status, self._unhealthy(name), pods, csi=csi)

    def _storage_changed(self, changed: bool) -> ViewChange:
        """A storage object changed: the nodes whose CSI volumes or limits it changed are rebuilt."""
        self._dirty.update(self.storage.take_touched())
        return ViewChange(capacity_grew=changed)

    def _unhealthy(self, node: str) -> set[int]:
        return unhealthy_devices(self._topologies.get(node), self._usage.get(node))


@dataclass(frozen=True)
class ViewTopic:
    """One topic the view follows: what an event of it does, and what its tombstone does."""

    topic: topics.Topic
    apply: Callable[[ClusterView, Any], ViewChange]
    tombstone: Callable[[ClusterView, str], ViewChange] | None = None  # None: not compacted, or nothing to undo


# Every topic whose events change the view; the placer follows these (and gang placements, which do not).
VIEW_TOPICS: tuple[ViewTopic, ...] = (
    ViewTopic(topics.TOPOLOGY_NODES, ClusterView._apply_topology, ClusterView._topology_gone),
    ViewTopic(topics.USAGE_DEVICES, ClusterView._apply_usage, ClusterView._usage_gone),
    ViewTopic(topics.NODES_STATUS, ClusterView._apply_status, ClusterView._status_gone),
    ViewTopic(topics.TOPOLOGY_NETWORK, ClusterView._apply_hypernode, ClusterView._hypernode_gone),
    ViewTopic(topics.TOPOLOGY_LEVELS, ClusterView._apply_levels, ClusterView._levels_gone),
    ViewTopic(topics.RESOURCE_SLICES, ClusterView._apply_slice, ClusterView._slice_gone),
    ViewTopic(topics.RESOURCE_CLAIMS, ClusterView._apply_claim, ClusterView._claim_gone),
    ViewTopic(topics.NAMESPACES, ClusterView._apply_namespace, ClusterView._namespace_gone),
    ViewTopic(topics.RESOURCE_CLASSES, ClusterView._apply_class, ClusterView._class_gone),
    ViewTopic(topics.RESOURCE_TAINT_RULES, ClusterView._apply_taint_rule, ClusterView._taint_rule_gone),
    ViewTopic(
        topics.STORAGE_CLAIMS,
        lambda v, e: v._storage_changed(v.storage.apply_claim(e)),
        lambda v, key: v._storage_changed(v.storage.claim_gone(key)),
    ),
    ViewTopic(
        topics.STORAGE_VOLUMES,
        lambda v, e: v._storage_changed(v.storage.apply_volume(e)),
        lambda v, key: v._storage_changed(v.storage.volume_gone(key)),
    ),
    ViewTopic(
        topics.STORAGE_CLASSES,
        lambda v, e: v._storage_changed(v.storage.apply_class(e)),
        lambda v, key: v._storage_changed(v.storage.class_gone(key)),
    ),
    ViewTopic(
        topics.STORAGE_CSINODES,
        lambda v, e: v._storage_changed(v.storage.apply_csi_node(e)),
        lambda v, node: v._storage_changed(v.storage.csi_node_gone(node)),
    ),
    ViewTopic(topics.DISRUPTION_BUDGETS, ClusterView._apply_budget, ClusterView._budget_gone),
    ViewTopic(topics.PODS_LIFECYCLE, ClusterView._apply_pod, ClusterView._pod_gone),
    ViewTopic(topics.PLACEMENTS, ClusterView._apply_decision),
    ViewTopic(topics.BINDINGS, ClusterView._apply_answer),
)
_BY_EVENT = {row.topic.event: row for row in VIEW_TOPICS}
_BY_TOPIC = {row.topic.name: row for row in VIEW_TOPICS}
