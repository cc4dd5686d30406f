"""The cluster index: nodes grouped into device classes, kept current one node at a time.

A decision must not loop over every node in Python: at 10,000 nodes that alone
costs milliseconds. The index keeps, for every node, its *device class*: what
the vendors read of a node to choose its devices (devices without their
UUIDs, links, machine type, the few labels and annotations a vendor reads,
the shares already held), interned to a small integer. Nodes of one class get
the same per-node answer for a request, so a decision asks the vendor once per
class (answers are memoised across decisions), ranks the classes, and only
then looks at single nodes, best class first, for the node-level rules
(readiness, cordon, taints, affinity, resources) until one passes.

The index changes only where a node changes (`upsert`, `remove`): the placer
keeps one for the life of its view; `ClusterIndex.of(snapshot)` builds (or
updates) one for a whole snapshot.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence

import msgspec

from engine.cluster.pods import PodTopologyIndex
from engine.cluster.resource_classes import ResourceClasses
from engine.core.memo import BoundedCache, IdentityCache, Interner
from engine.core.model import Allocation, NodeState, Snapshot
from engine.node.fragmentation import node_cpu
from schemas import hami
from schemas.kube import PREFER_NO_SCHEDULE
from schemas.topology import Device

CLASS_LOG_BOUND = 200_000  # classes logged before the log starts over (rankings then rebuild)
CLASS_BOUND = 65_536  # distinct device classes remembered (ids only grow; see cache.Interner)
ANONYMOUS_BOUND = 32_768  # distinct device tuples with their UUIDs stripped


class NodeReads(msgspec.Struct, frozen=True, kw_only=True):
    """What of a node any vendor reads (part of the device class): labels, annotations, and (`resources`)
    its CPU, which the fragmentation policy weighs when the workload's classes name CPU."""

    labels: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()
    resources: bool = False


class DeviceClasses:
    """Device class ids: equal keys, one id. An index's class ids are its own (indexes an engine makes share
    the engine's, so its answers per class carry over between them); never reused (ids only grow)."""

    def __init__(self) -> None:
        self._anonymous: IdentityCache[tuple[Device, ...], tuple[Device, ...]] = IdentityCache(ANONYMOUS_BOUND)
        self._classes: Interner[tuple[object, ...]] = Interner(CLASS_BOUND)
        # A class that reads CPU -> the class of its node with the CPU left out (vendors never read CPU:
        # what they refuse on one, they refuse on the other; decide/ranking.py shares those refusals).
        self._cpu_blind: BoundedCache[int, int] = BoundedCache(CLASS_BOUND)

    def anonymous_devices(self, devices: tuple[Device, ...]) -> tuple[Device, ...]:
        """The devices without their UUIDs (memoised by identity: a node's tuple is shared across its updates)."""
        found = self._anonymous.get(devices)
        if found is None:
            found = tuple(msgspec.structs.replace(d, uuid="") if d.uuid else d for d in devices)
            self._anonymous.put(devices, found)
        return found

    def class_of(self, node: NodeState, reads: NodeReads) -> int:
        """Equal for two nodes exactly when a vendor that does not read UUIDs cannot tell them apart."""
        key: tuple[object, ...] = (
            self.anonymous_devices(node.devices),
            node.links,
            node.machine_type,
            tuple((k, node.labels.get(k)) for k in reads.labels),
            tuple(sorted(_read_annotations(node, reads).items())),
            tuple(_share(a) for a in node.allocations),
            node_cpu(node) if reads.resources else None,
        )
        class_id = self._classes.id_of(key)
        if key[-1] is not None:
            self._cpu_blind.put(class_id, self._classes.id_of((*key[:-1], None)))
        return class_id

    def cpu_blind(self, class_id: int) -> int | None:
        """The class, without its CPU, of a class that reads CPU (None: it reads none, or it was forgotten)."""
        return self._cpu_blind.get(class_id)

    def state_of(self, node: NodeState, reads: NodeReads) -> NodeState:
        """The node as its class presents it to a vendor: no name, no UUIDs, no pod uids, only the read labels."""
        return class_state(node, reads, self.anonymous_devices(node.devices))


def class_state(node: NodeState, reads: NodeReads, devices: tuple[Device, ...]) -> NodeState:
    """`node` as its class presents it, with `devices` (its devices without UUIDs)."""
    return NodeState(
        name="",
        machine_type=node.machine_type,
        devices=devices,
        links=node.links,
        labels={k: node.labels[k] for k in reads.labels if k in node.labels},
        annotations=_read_annotations(node, reads),
        allocatable=_read_cpu(node.allocatable) if reads.resources and node.allocatable is not None else None,
        requested=_read_cpu(node.requested) if reads.resources else {},
        allocations=tuple(msgspec.structs.replace(a, pod_uid="") for a in node.allocations),
    )


def _read_cpu(amounts: dict[str, str]) -> dict[str, str]:
    return {"cpu": amounts["cpu"]} if "cpu" in amounts else {}


def _read_annotations(node: NodeState, reads: NodeReads) -> dict[str, str]:
    """The read annotations; HAMi's device cordon by device index, since a class has no UUIDs."""
    kept = {k: node.annotations[k] for k in reads.annotations if k in node.annotations}
    if hami.DEVICE_CORDON in kept:
        kept[hami.DEVICE_CORDON] = hami.cordon_by_index(kept, ((d.index, d.uuid) for d in node.devices)) or ""
    return kept


def _soft_tainted(node: NodeState | None) -> bool:
    return node is not None and any(t.effect == PREFER_NO_SCHEDULE for t in node.taints)


def _share(a: Allocation) -> tuple[int, int, int, str, str]:
    return (a.index, a.memory_mib, a.cores, a.qos, a.app_class)


class ClusterIndex:
    """Every node by name, sorted names, and the members of each device class (sorted by name)."""

    def __init__(
        self, reads: NodeReads, nodes: Iterable[NodeState] = (), *, classes: DeviceClasses | None = None
    ) -> None:
        """`classes`: whose class ids to use (an engine's, shared by its indexes); a new set when None."""
        self.reads = reads
        self.device_classes = classes if classes is not None else DeviceClasses()
        self._nodes: dict[str, NodeState] = {}
        self._class: dict[str, int] = {}
        self._members: dict[int, list[str]] = {}
        self._class_states: dict[int, NodeState] = {}  # live classes' states, built on first need
        self._names: list[str] = []
        self._snapshot_nodes: tuple[NodeState, ...] | None = None
        # Classes in the order they gained their first node (again): rankings kept per request
        # (decide/ranking.py) read what is new since they last looked. Reset when it grows long.
        self.class_log: list[int] = []
        self.log_epoch = 0
        # Names of the nodes upserted (changed) or removed, in order: what a decision's cached feasible
        # set (decide/kube/feasible.py) reads to catch up. Reset (and its epoch moved on) when long.
        self.node_log: list[str] = []
        self.node_log_epoch = 0
        self.pods = PodTopologyIndex()  # running pods by labels and domain (InterPodAffinity, PodTopologySpread)
        self.resources = ResourceClasses()  # nodes by what kube's resource scores read (and zone, region)
        self.soft_tainted = 0  # nodes with a PreferNoSchedule taint (TaintToleration then normalises)
        for node in nodes:
            self.upsert(node)

    # --- changes ---------------------------------------------------------------------------

    def upsert(self, node: NodeState) -> None:
        name = node.name
        before = self._nodes.get(name)
        if before is node:
            return
        self._nodes[name] = node
        self.soft_tainted += _soft_tainted(node) - _soft_tainted(before)
        self._log_node(name)
        self.pods.sync(node)
        self.resources.upsert(node)
        new_class = self.device_classes.class_of(node, self.reads)
        if before is None:
            bisect.insort(self._names, name)
        else:
            old_class = self._class[name]
            if old_class == new_class:
                return
            self._leave(old_class, name)
        self._class[name] = new_class
        members = self._members.get(new_class)
        if members is None:
            members = self._members[new_class] = []
            self._log_class(new_class)
        bisect.insort(members, name)

    def _log_class(self, class_id: int) -> None:
        if len(self.class_log) >= CLASS_LOG_BOUND:
            self.class_log = []
            self.log_epoch += 1  # every ranking starts over from the live classes
        self.class_log.append(class_id)

    def _log_node(self, name: str) -> None:
        if len(self.node_log) >= CLASS_LOG_BOUND:
            self.node_log = []
            self.node_log_epoch += 1  # every cached feasible set starts over
        self.node_log.append(name)

    def remove(self, name: str) -> None:
        before = self._nodes.pop(name, None)
        if before is None:
            return
        self.soft_tainted -= _soft_tainted(before)
        self._log_node(name)
        self.pods.drop(name)
        self.resources.remove(name)
        self._leave(self._class.pop(name), name)
        del self._names[bisect.bisect_left(self._names, name)]

    def _leave(self, class_id: int, name: str) -> None:
        members = self._members[class_id]
        del members[bisect.bisect_left(members, name)]
        if not members:
            del self._members[class_id]
            self._class_states.pop(class_id, None)

    # --- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    def node(self, name: str) -> NodeState:
        return self._nodes[name]

    def get(self, name: str) -> NodeState | None:
        return self._nodes.get(name)

    @property
    def names(self) -> Sequence[str]:
        """Every node name, sorted (read-only)."""
        return self._names

    def nodes(self) -> Iterator[NodeState]:
        """Every node, by name."""
        return (self._nodes[n] for n in self._names)

    def class_id(self, name: str) -> int:
        return self._class[name]

    def members(self, class_id: int) -> Sequence[str]:
        """The class's nodes, sorted by name (empty when no node has it now)."""
        return self._members.get(class_id, ())

    def is_live(self, class_id: int) -> bool:
        return class_id in self._members

    def classes(self) -> Iterator[tuple[int, Sequence[str]]]:
        """(class id, member names sorted) for every class with members."""
        return iter(self._members.items())

    def class_count(self) -> int:
        return len(self._members)

    def class_state(self, class_id: int) -> NodeState:
        """The class as it presents itself to a vendor (its first member, nameless): one object per live class,
        so what is kept of a state by identity (its device loads) is built once for every request."""
        found = self._class_states.get(class_id)
        if found is None:
            found = self.device_classes.state_of(self._nodes[self._members[class_id][0]], self.reads)
            self._class_states[class_id] = found
        return found

    # --- from a snapshot ---------------------------------------------------------------------

    @classmethod
    def of(
        cls,
        snapshot: Snapshot,
        reads: NodeReads,
        previous: ClusterIndex | None = None,
        *,
        classes: DeviceClasses | None = None,
    ) -> ClusterIndex:
        """An index of the snapshot's nodes; `previous` is updated in place when given (unchanged nodes cost
        an identity check), else a new one is built (with `classes`). Raises ValueError on a node name given
        twice."""
        if previous is not None and previous._snapshot_nodes is snapshot.nodes and previous.reads == reads:
            previous.pods.set_namespaces(snapshot.namespaces)
            return previous
        index = previous if previous is not None and previous.reads == reads else cls(reads, classes=classes)
        seen: set[str] = set()
        for node in snapshot.nodes:
            if node.name in seen:
                raise ValueError(node.name)
            seen.add(node.name)
            index.upsert(node)
        for name in [n for n in index._names if n not in seen]:
            index.remove(name)
        index._snapshot_nodes = snapshot.nodes
        index.pods.set_namespaces(snapshot.namespaces)
        return index
