"""Neuron and MetaX nodes' devices, read from their Node objects -> topology.nodes, unless a node agent publishes them.

A vendor whose device plugin describes the node's devices on the Node (resources in
`status.capacity`, a device list in an annotation) needs no agent of ours: the node package's
discovery reads them as HAMi does (services.collector.node.discovery, one module per vendor),
and this tracker publishes the result on topology.nodes, key node, as the node agent would.
What is relayed is the node's own word: the kubelet and the vendor's device plugin write that
Node's status and annotations, and the binder checks every topology against the Node's
allocatable all the same.

A node agent's topology is richer (NVML's links, health, usage) and wins: the watcher follows
topology.nodes and never publishes a node whose latest record is not its own (its records'
`source` starts with discovery's `source_prefix`), nor tombstones it. Nothing goes out before the
topic was read to its end and the nodes were listed once, so an agent's record already there
is never overwritten; then every discovered node not an agent's is published, and what the
watcher published before for a node now gone (or no longer of a known vendor) is tombstoned.
A Node that cannot be read is reported once per distinct reason, and its last topology stays.
"""

from __future__ import annotations

import msgspec

from schemas import topics
from schemas.events import Event, NodeStatusEvent, NodeTopologyEvent
from services.collector.cluster.objects import Node
from services.collector.cluster.trackers import KeyedTracker, Outcome, Publication
from services.collector.cluster.translate import Problem
from services.collector.node.discovery import DiscoveryError, NodeObject, discover, source_prefix
from topoplace.event_checks import InvalidEvent, check_event

TOPIC = topics.TOPOLOGY_NODES.name


def node_object(node: Node) -> NodeObject:
    """What discovery reads of a Node: name, labels, annotations, `status.capacity` as written."""
    meta = node.metadata
    capacity = {resource: str(value) for resource, value in node.status.capacity.items()}
    return NodeObject(name=meta.name, labels=meta.labels, annotations=meta.annotations, capacity=capacity)


def discovered_event(node: NodeObject, observed_at: float) -> NodeTopologyEvent | None | Problem:
    """The node's topology event; None: no vendor discovery reads it; a Problem: the Node cannot be read."""
    name = node.name
    try:
        topology = discover(node)
    except DiscoveryError as exc:
        return Problem(
            object=name, field="devices", reason=str(exc)
        )  # the reason names the label, annotation or capacity
    if topology is None:
        return None
    event = NodeTopologyEvent(
        node=topology.node,
        machine_type=topology.machine_type,
        devices=topology.devices,
        links=topology.links,
        source=topology.source,
        observed_at=observed_at,
    )
    try:
        check_event(TOPIC, name, event)  # what every reader checks: refused here rather than dead-lettered there
    except InvalidEvent as exc:
        return Problem(object=name, field=f"topology.nodes {exc.field}", reason=exc.reason)
    return event


def is_discovered(event: NodeTopologyEvent) -> bool:
    """Whether a topology.nodes record is one read from the Node object (else a node agent's)."""
    return event.source.startswith(source_prefix(event.node))


def _same(a: NodeTopologyEvent | None, b: NodeTopologyEvent) -> bool:
    return a is not None and msgspec.structs.replace(a, observed_at=0.0) == msgspec.structs.replace(b, observed_at=0.0)


class NodeTopologyTracker:
    """The discovered topology of every Node of a known vendor, and who holds each node's key on topology.nodes."""

    def __init__(self) -> None:
        self._discovered: dict[str, NodeTopologyEvent] = {}  # read from the Node, published or not
        self._ours: set[str] = set()  # keys whose latest record on the topic is ours (as sent or read back)
        self._agents: set[str] = set()  # keys whose latest record on the topic is a node agent's
        self._reported: dict[str, str] = {}  # the last problem reported per node: once per distinct reason
        # the last reading per node: a Node's status heartbeats change nothing discovery reads
        self._readings: dict[str, tuple[NodeObject, NodeTopologyEvent | None | Problem]] = {}
        self._listed = False
        self._read_back = False

    @property
    def live(self) -> bool:
        """The nodes listed once and the topic read to its end: from then on it publishes."""
        return self._listed and self._read_back

    def observe(self, node: Node, now: float, *, force: bool = False) -> Outcome:
        name = node.metadata.name
        found = self._read(node, now)
        if isinstance(found, Problem):
            if self._reported.get(name) == found.reason:
                return Outcome()
            self._reported[name] = found.reason
            return Outcome(problems=[found])
        self._reported.pop(name, None)
        if found is None:
            self._discovered.pop(name, None)
            return Outcome(publications=self._withdrawn(name))
        before = self._discovered.get(name)
        self._discovered[name] = found
        if not self.live or name in self._agents or (name in self._ours and _same(before, found) and not force):
            return Outcome()
        self._ours.add(name)
        return Outcome(publications=[Publication(topic=TOPIC, key=name, event=found)])

    def _read(self, node: Node, now: float) -> NodeTopologyEvent | None | Problem:
        read = node_object(node)
        last = self._readings.get(read.name)
        if last is not None and last[0] == read:
            return last[1]
        found = discovered_event(read, now)
        self._readings[read.name] = (read, found)
        return found

    def gone(self, name: str, now: float) -> Outcome:
        self._discovered.pop(name, None)
        self._reported.pop(name, None)
        self._readings.pop(name, None)
        return Outcome(publications=self._withdrawn(name))

    def relisted(self, nodes: list[Node], now: float, *, force: bool = False) -> Outcome:
        was_live = self.live
        self._listed = True
        present = {n.metadata.name for n in nodes}
        outcome = Outcome()
        for name in sorted((set(self._discovered) | self._ours) - present):
            outcome.extend(self.gone(name, now))
        for node in nodes:
            outcome.extend(self.observe(node, now, force=force or not was_live))
        return outcome

    def on_topic(self, key: str, event: Event | None) -> Outcome:
        """A topology.nodes record read back (anyone's). A node whose agent's record was removed gets ours again."""
        if isinstance(event, NodeTopologyEvent) and not is_discovered(event):
            self._agents.add(key)
            self._ours.discard(key)
            return Outcome()
        self._agents.discard(key)
        if event is not None:
            self._ours.add(key)
            return Outcome()
        # a tombstone (or a record every reader refused): ours again, if the Node still says something
        mine = self._discovered.get(key)
        if mine is None or not self.live:
            self._ours.discard(key)
            return Outcome()
        self._ours.add(key)
        return Outcome(publications=[Publication(topic=TOPIC, key=key, event=mine)])

    def caught_up(self, now: float) -> Outcome:
        """The topic read to its end: once the nodes are listed too, every discovered node goes out."""
        if self._read_back:
            return Outcome()
        self._read_back = True
        if not self._listed:
            return Outcome()
        outcome = Outcome()
        for name in sorted(self._ours - set(self._discovered)):
            outcome.extend(self.gone(name, now))
        for name, event in sorted(self._discovered.items()):
            if name not in self._agents:
                self._ours.add(name)
                outcome.publications.append(Publication(topic=TOPIC, key=name, event=event))
        return outcome

    def _withdrawn(self, name: str) -> list[Publication]:
        """A tombstone for the node's record when the latest one is ours (an agent's is never touched)."""
        if name not in self._ours or name in self._agents or not self.live:
            return []
        self._ours.discard(name)
        return [Publication(topic=TOPIC, key=name, event=None)]


class NodeObjects:
    """The nodes row's tracker: each Node -> nodes.status (its status), and topology.nodes (its devices)."""

    def __init__(self, status: KeyedTracker[Node, NodeStatusEvent], devices: NodeTopologyTracker) -> None:
        self.status = status
        self.devices = devices

    def relisted(self, objs: list[Node], now: float, *, force: bool = False) -> Outcome:
        return self.status.relisted(objs, now, force=force).extend(self.devices.relisted(objs, now, force=force))

    def observe(self, obj: Node, now: float) -> Outcome:
        return self.status.observe(obj, now).extend(self.devices.observe(obj, now))

    def gone(self, key: str, now: float) -> Outcome:
        return self.status.gone(key, now).extend(self.devices.gone(key, now))
