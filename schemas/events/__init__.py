"""Every event on every topic, as one msgspec Struct per topic.

JSON on the wire. Each event carries `schema_version`; a consumer rejects a
version it does not know into the topic's DLQ instead of guessing.

One module per family of topics; every name is re-exported here, so
`schemas.events.X` is the one import path:

    base.py          SCHEMA_VERSION, the size bounds, Event
    nodes.py         topology.nodes, usage.devices, nodes.status
    network.py       topology.network (hypernodes), topology.levels
    pods.py          pods.pending, pods.lifecycle (and DeviceAssignment)
    namespaces.py    namespaces
    resources.py     resources.slices, resources.claims (DRA)
    storage.py       storage.claims, storage.volumes, storage.classes, storage.csinodes
    gangs.py         gangs.pending, gangs.placements
    decisions.py     placements, bindings
    disruption.py    disruption.budgets (PodDisruptionBudgets)
    dead_letters.py  <topic>.dlq
"""

from __future__ import annotations

from schemas.events.base import MAX_EVENT_BYTES, MAX_GANG_EVENT_BYTES, MAX_POD_EVENT_BYTES, SCHEMA_VERSION, Event
from schemas.events.dead_letters import DeadLetterEvent
from schemas.events.decisions import (
    MAX_ALTERNATIVES,
    Alternative,
    BindingEvent,
    BindingOutcome,
    PlacementEvent,
    PlacementOutcome,
    PreemptionVictim,
)
from schemas.events.disruption import DisruptionBudgetEvent
from schemas.events.gangs import (
    GangPlacementEvent,
    GangTierRefusal,
    NetworkConstraint,
    PendingGangEvent,
    RunningMember,
    SubGroupPolicy,
    TopologyMode,
)
from schemas.events.namespaces import NamespaceEvent
from schemas.events.network import (
    HyperNodeEvent,
    HyperNodeMember,
    LabelSelector,
    LabelSelectorRequirement,
    MemberKind,
    TopologyLevelsEvent,
)
from schemas.events.nodes import DeviceUsage, DeviceUsageEvent, NodeImage, NodeStatusEvent, NodeTopologyEvent
from schemas.events.pods import DeviceAssignment, GangRef, LifecyclePhase, PendingPodEvent, PodLifecycleEvent
from schemas.events.resources import (
    AllocatedClaimEvent,
    DeviceClassEvent,
    DeviceTaintRuleEvent,
    ResourceSliceEvent,
)
from schemas.events.storage import CsiNodeEvent, PersistentVolumeEvent, StorageClassEvent, VolumeClaimEvent

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_EVENT_BYTES",
    "MAX_GANG_EVENT_BYTES",
    "MAX_POD_EVENT_BYTES",
    "SCHEMA_VERSION",
    "AllocatedClaimEvent",
    "DeviceClassEvent",
    "DeviceTaintRuleEvent",
    "Alternative",
    "BindingEvent",
    "BindingOutcome",
    "CsiNodeEvent",
    "DeadLetterEvent",
    "DeviceAssignment",
    "DeviceUsage",
    "DeviceUsageEvent",
    "DisruptionBudgetEvent",
    "Event",
    "GangPlacementEvent",
    "GangRef",
    "GangTierRefusal",
    "HyperNodeEvent",
    "HyperNodeMember",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LifecyclePhase",
    "MemberKind",
    "NamespaceEvent",
    "NetworkConstraint",
    "NodeImage",
    "NodeStatusEvent",
    "NodeTopologyEvent",
    "PendingGangEvent",
    "PendingPodEvent",
    "PersistentVolumeEvent",
    "PlacementEvent",
    "PlacementOutcome",
    "PodLifecycleEvent",
    "PreemptionVictim",
    "ResourceSliceEvent",
    "RunningMember",
    "StorageClassEvent",
    "SubGroupPolicy",
    "TopologyLevelsEvent",
    "TopologyMode",
    "VolumeClaimEvent",
]
