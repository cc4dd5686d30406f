"""Neuron and MetaX nodes' devices read from their Node objects, and who holds each node's key on topology.nodes."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import topics
from schemas.events import NodeTopologyEvent
from services.collector.cluster.node_devices import NodeTopologyTracker, is_discovered
from services.collector.cluster.objects import Node
from services.collector.cluster.trackers import Outcome
from services.collector.node.agent import topology_event
from services.collector.node.topology_files import fixture_node_annotations, load_topology

TYPE = "node.kubernetes.io/instance-type"


def node_json(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
              capacity: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "status": {"capacity": {"cpu": "192", **(capacity or {})}, "allocatable": {"cpu": "192", **(capacity or {})}},
    }


def trn1_json(name: str, devices: str = "16") -> dict[str, Any]:
    """A trn1.32xlarge as EKS and the Neuron device plugin describe it."""
    capacity = {"aws.amazon.com/neurondevice": devices, "aws.amazon.com/neuroncore": "32"}
    return node_json(name, labels={TYPE: "trn1.32xlarge"}, capacity=capacity)


def metax_json(name: str) -> dict[str, Any]:
    """An 8-card MetaX node with the sGPU plugin's device list (two MetaXLink zones)."""
    notes = fixture_node_annotations("metax-8gpu-2zone", node=name)
    return node_json(name, annotations=notes, capacity={"metax-tech.com/gpu": "8"})


def as_node(body: dict[str, Any]) -> Node:
    return msgspec.convert(body, Node)


def topologies(outcome: Outcome) -> dict[str, NodeTopologyEvent | None]:
    sent: dict[str, NodeTopologyEvent | None] = {}
    for p in outcome.publications:
        assert p.topic == topics.TOPOLOGY_NODES.name
        assert p.event is None or isinstance(p.event, NodeTopologyEvent)
        sent[p.key] = p.event
    return sent


def agents_record(name: str) -> NodeTopologyEvent:
    """What a node agent (here from the fixture) publishes for the node."""
    return topology_event(load_topology("trn1.32xlarge", node=name), 1.0)


def live_tracker(
    *nodes: dict[str, Any], on_topic: tuple[tuple[str, Any], ...] = ()
) -> tuple[NodeTopologyTracker, Outcome]:
    tracker = NodeTopologyTracker()
    for key, event in on_topic:
        assert tracker.on_topic(key, event).publications == []
    assert tracker.relisted([as_node(n) for n in nodes], 1.0).publications == []  # the topic not read yet
    return tracker, tracker.caught_up(2.0)


def test_neuron_and_metax_nodes_go_out_once_listed_and_the_topic_read() -> None:
    tracker, first = live_tracker(trn1_json("trn-1"), metax_json("mx-1"), node_json("cpu-1"))
    sent = topologies(first)
    assert sorted(sent) == ["mx-1", "trn-1"]  # a node of no such vendor has no topology here
    trn, mx = sent["trn-1"], sent["mx-1"]
    assert trn is not None and mx is not None
    fixture = load_topology("trn1.32xlarge", node="trn-1")
    assert (len(trn.devices), trn.links, trn.machine_type) == (16, fixture.links, "trn1.32xlarge")
    assert len(mx.devices) == 8 and sorted({d.link_zone for d in mx.devices}) == [1, 2]
    assert is_discovered(trn) and is_discovered(mx)
    # a heartbeat changes nothing discovery reads: nothing again; a resync sends it again
    assert tracker.observe(as_node(trn1_json("trn-1")), 3.0).publications == []
    assert sorted(topologies(tracker.relisted([as_node(trn1_json("trn-1"))], 4.0, force=True))) == ["mx-1", "trn-1"]


def test_an_agents_record_wins_whichever_came_first() -> None:
    # the agent's record already on the topic: the watcher never publishes that node
    tracker, first = live_tracker(trn1_json("trn-a"), trn1_json("trn-b"), on_topic=(("trn-a", agents_record("trn-a")),))
    assert sorted(topologies(first)) == ["trn-b"]
    assert "trn-a" not in topologies(tracker.relisted([as_node(trn1_json("trn-a"))], 3.0, force=True))
    # the agent starts after the watcher published: from its first record on, the node is its
    assert tracker.on_topic("trn-b", topologies(first)["trn-b"]).publications == []  # ours, read back
    assert tracker.on_topic("trn-b", agents_record("trn-b")).publications == []
    both = [as_node(trn1_json("trn-a")), as_node(trn1_json("trn-b"))]
    assert topologies(tracker.relisted(both, 4.0, force=True)) == {}
    # deleted: an agent's record is not the watcher's to remove
    assert topologies(tracker.gone("trn-b", 5.0)) == {}
    # an agent's record removed (a tombstone): the Node's word goes out again
    again = topologies(tracker.on_topic("trn-a", None))
    assert list(again) == ["trn-a"] and again["trn-a"] is not None and is_discovered(again["trn-a"])


def test_a_node_gone_or_no_longer_of_a_vendor_is_withdrawn() -> None:
    tracker, _ = live_tracker(trn1_json("trn-1"), metax_json("mx-1"))
    assert topologies(tracker.gone("trn-1", 3.0)) == {"trn-1": None}
    assert topologies(tracker.observe(as_node(node_json("mx-1")), 4.0)) == {"mx-1": None}  # the plugin removed


def test_records_of_nodes_deleted_while_the_watcher_was_down_are_withdrawn() -> None:
    _, earlier = live_tracker(trn1_json("old"))
    old = topologies(earlier)["old"]
    tracker, first = live_tracker(trn1_json("trn-1"), on_topic=(("old", old),))
    assert topologies(first)["old"] is None and topologies(first)["trn-1"] is not None


def test_a_node_that_cannot_be_read_is_reported_once_and_keeps_its_topology() -> None:
    tracker, _ = live_tracker(trn1_json("trn-1"))
    bad = as_node(trn1_json("trn-1", devices="8"))  # a trn1.32xlarge has 16
    first = tracker.observe(bad, 3.0)
    assert first.publications == [] and [p.object for p in first.problems] == ["trn-1"]
    assert "16" in first.problems[0].reason and "aws.amazon.com/neurondevice" in first.problems[0].reason
    assert tracker.observe(bad, 4.0).problems == []  # once per distinct reason
    assert topologies(tracker.gone("trn-1", 5.0)) == {"trn-1": None}  # what it published stays ours


# --- a property: whatever the order, an agent's record is never the watcher's to write ----------

NAMES = ("n0", "n1", "n2")
NODE_KINDS = {
    "trn1.2xlarge": lambda name: node_json(
        name, labels={TYPE: "trn1.2xlarge"}, capacity={"aws.amazon.com/neurondevice": "1"}
    ),
    "metax": lambda name: node_json(name, capacity={"metax-tech.com/gpu": "4"}),
    "cpu": lambda name: node_json(name),
}
STEPS = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NAMES), st.sampled_from([*NODE_KINDS, "deleted"])),
    st.tuples(st.just("agent"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("agent_gone"), st.sampled_from(NAMES), st.just("")),
    st.tuples(st.just("resync"), st.just(""), st.just("")),
    st.tuples(st.just("caught_up"), st.just(""), st.just("")),
)


class Topic:
    """topology.nodes as the watcher reads it back: every record echoed to it at once."""

    def __init__(self, tracker: NodeTopologyTracker) -> None:
        self.tracker = tracker
        self.latest: dict[str, NodeTopologyEvent | None] = {}

    def agents(self, name: str) -> bool:
        event = self.latest.get(name)
        return event is not None and not is_discovered(event)

    def write(self, key: str, event: NodeTopologyEvent | None) -> None:
        self.latest[key] = event
        self.apply(self.tracker.on_topic(key, event))

    def apply(self, outcome: Outcome) -> None:
        for key, event in topologies(outcome).items():
            assert not self.agents(key), f"the watcher wrote over an agent's record of {key}"
            self.write(key, event)


@settings(max_examples=60, deadline=None)
@given(before=st.lists(st.sampled_from(NAMES), unique=True), steps=st.lists(STEPS, max_size=25))
def test_an_agents_record_is_never_overwritten_and_every_other_node_ends_as_its_node_says(
    before: list[str], steps: list[tuple[str, str, str]]
) -> None:
    tracker = NodeTopologyTracker()
    topic = Topic(tracker)
    for name in before:  # records already on the topic: an agent's
        topic.write(name, agents_record(name))
    nodes: dict[str, Node] = {}
    listed = False
    for step, name, kind in steps:
        if step == "node" and kind == "deleted":
            if nodes.pop(name, None) is not None and listed:
                topic.apply(tracker.gone(name, 1.0))
        elif step == "node":
            nodes[name] = as_node(NODE_KINDS[kind](name))
            if listed:
                topic.apply(tracker.observe(nodes[name], 1.0))
        elif step == "agent":
            topic.write(name, agents_record(name))
        elif step == "agent_gone":
            topic.write(name, None)
        elif step == "resync":
            listed = True
            topic.apply(tracker.relisted(list(nodes.values()), 1.0, force=True))
        else:
            topic.apply(tracker.caught_up(1.0))
    topic.apply(tracker.relisted(list(nodes.values()), 2.0, force=True))
    topic.apply(tracker.caught_up(2.0))
    for name in NAMES:
        if topic.agents(name):
            continue
        node = nodes.get(name)
        carries = node is not None and node.status.capacity.keys() - {"cpu"}
        latest = topic.latest.get(name)
        if carries:
            assert latest is not None and latest.node == name and is_discovered(latest)
        else:
            assert latest is None, f"{name}: a record of a node that is gone or has no such devices"
