"""KAI's Topology objects (`kai.scheduler/v1alpha1`) -> topology.levels, as Kueue's Topologies go there.

A KAI Topology is `spec.levels[].nodeLabel`, top level first, exactly as Kueue's: it is decoded into
the same Struct (objects.Topology) and translated by the same function (network.py), an empty
label left out and reported. It is published under `kai.scheduler/<name>`, as key and as event
name: both kinds are cluster-scoped, and a KAI Topology and a Kueue Topology of one name are two
trees, which `engine place --cluster` also keeps apart by API group (topoplace/cluster_objects/gangs.py).
"""

from __future__ import annotations

import msgspec

from schemas import topics
from schemas.events import TopologyLevelsEvent
from services.collector.cluster import network
from services.collector.cluster.objects import Topology
from services.collector.cluster.trackers import KeyedTracker, Publication
from services.collector.cluster.translate import Problem
from topoplace.cluster_objects.gangs import KAI_TOPOLOGY_API

KAI_TOPOLOGY_GROUP, KAI_TOPOLOGIES = KAI_TOPOLOGY_API, "topologies"
KAI_TOPOLOGY_VERSIONS = ("v1alpha1",)  # the first one served is watched
_PREFIX = f"{KAI_TOPOLOGY_GROUP}/"


def levels_name(topology: Topology) -> str:
    """Its key on topology.levels (and its event's name): `kai.scheduler/<name>`."""
    return f"{_PREFIX}{topology.metadata.name}"


def is_kai_levels(name: str) -> bool:
    """Whether a topology.levels record is a KAI Topology's (the rest are Kueue's)."""
    return name.startswith(_PREFIX)


def kai_levels_event(topology: Topology, observed_at: float) -> tuple[TopologyLevelsEvent, list[Problem]]:
    """The Topology's node-label keys, top level first, under its qualified name."""
    event, problems = network.topology_levels_event(topology, observed_at)
    who = f"Topology {topology.metadata.name} ({KAI_TOPOLOGY_GROUP})"
    return (
        msgspec.structs.replace(event, name=levels_name(topology)),
        [msgspec.structs.replace(problem, object=who) for problem in problems],
    )


def kai_topology_tracker() -> KeyedTracker[Topology, TopologyLevelsEvent]:
    def on_gone(name: str, last: TopologyLevelsEvent, now: float) -> list[Publication]:
        # as a Kueue Topology's: the deleted event tells live readers, the tombstone lets compaction drop it
        deleted = network.topology_deleted_event(name, now)
        return [
            Publication(topic=topics.TOPOLOGY_LEVELS.name, key=name, event=deleted),
            Publication(topic=topics.TOPOLOGY_LEVELS.name, key=name, event=None),
        ]

    return KeyedTracker(kai_levels_event, levels_name, on_gone, topics.TOPOLOGY_LEVELS.name, mine=is_kai_levels)
