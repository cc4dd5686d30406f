"""What a decoded event must also satisfy before any service trusts it: one registry, by topic.

Decoding (topoplace.kafka.wire) checks each field on its own; these checks say how the
fields must agree with each other and with the message's key. Every consumer of a topic
(the placer and the binder through topoplace.kafka.records, the collector's seeding, the node
agent before it publishes) applies the same check, so a message is good or bad for all
of them alike. A failed check names the field and the reason, and the consumer
dead-letters the message as `RejectReason.INVALID_EVENT`.

- Keyed state: a compacted topic's key is the object the event describes (topology.nodes,
  usage.devices and nodes.status: the node; pods.lifecycle: the pod uid; ...). A message
  keyed `gpu-9` naming `gpu-1` would rewrite gpu-1 under a key that no later gpu-1
  record compacts away.
- A node's topology: the engine's own rules for a node (engine.validate: indices unique,
  links between devices the node has, no negative amounts), and each device's UUID
  unique on the node: two indices with one UUID would give two pods "different" devices
  that are one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from engine.core.errors import RequestError
from engine.core.model import NodeState
from engine.core.validate import validate_node
from schemas import topics
from schemas.errors import FieldError
from schemas.events import (
    CsiNodeEvent,
    DeviceClassEvent,
    DeviceTaintRuleEvent,
    DeviceUsageEvent,
    DisruptionBudgetEvent,
    Event,
    HyperNodeEvent,
    NamespaceEvent,
    NodeStatusEvent,
    NodeTopologyEvent,
    PersistentVolumeEvent,
    PodLifecycleEvent,
    ResourceSliceEvent,
    StorageClassEvent,
    TopologyLevelsEvent,
    VolumeClaimEvent,
)


class InvalidEvent(FieldError):
    """An event whose fields disagree with each other or with its key; `field` names where."""


# (key, event) -> None, or InvalidEvent. The event is already of the topic's type.
EventCheck = Callable[[str | None, Event], None]


def _keyed_by(field: str, key: str | None, value: str) -> None:
    if not value:
        raise InvalidEvent(field, "must not be empty")
    if key != value:
        raise InvalidEvent("key", f"the message is keyed {key!r} but its {field} is {value!r}: the key must name it")


def check_topology(key: str | None, event: Event) -> None:
    """A node's devices: keyed by the node, the engine's node rules, one UUID per device."""
    assert isinstance(event, NodeTopologyEvent)
    _keyed_by("node", key, event.node)
    check_node_topology(event)


def check_node_topology(event: NodeTopologyEvent) -> None:
    """The topology alone, as the node agent checks it before publishing (InvalidEvent)."""
    state = NodeState(name=event.node, machine_type=event.machine_type, devices=event.devices, links=event.links)
    try:
        validate_node(state, "")
    except RequestError as exc:
        raise InvalidEvent(exc.field.removeprefix("."), exc.reason) from None
    owners: dict[str, int] = {}
    for position, device in enumerate(event.devices):
        if not device.uuid:
            continue  # a device without a UUID (a fixture) is named by its index alone
        if device.uuid in owners:
            first = event.devices[owners[device.uuid]].index
            raise InvalidEvent(
                f"devices[{position}].uuid",
                f"{device.uuid!r} is also the UUID of device {first}: one device cannot have two indices",
            )
        owners[device.uuid] = position


def check_usage(key: str | None, event: Event) -> None:
    assert isinstance(event, DeviceUsageEvent)
    _keyed_by("node", key, event.node)
    seen: dict[int, int] = {}
    for position, device in enumerate(event.devices):
        if device.index in seen:
            reason = f"device {device.index} appears twice (also devices[{seen[device.index]}])"
            raise InvalidEvent(f"devices[{position}].index", reason)
        seen[device.index] = position


def check_lifecycle(key: str | None, event: Event) -> None:
    assert isinstance(event, PodLifecycleEvent)
    _keyed_by("uid", key, event.uid)


def check_node_status(key: str | None, event: Event) -> None:
    assert isinstance(event, NodeStatusEvent)
    _keyed_by("node", key, event.node)


def check_named(key: str | None, event: Event) -> None:
    """State keyed by the object's name: HyperNodes, Kueue Topologies, ResourceSlices, Namespaces,
    DeviceClasses, DeviceTaintRules."""
    assert isinstance(
        event,
        HyperNodeEvent
        | TopologyLevelsEvent
        | ResourceSliceEvent
        | NamespaceEvent
        | DeviceClassEvent
        | DeviceTaintRuleEvent,
    )
    _keyed_by("name", key, event.name)


def check_volume_claim(key: str | None, event: Event) -> None:
    """A PersistentVolumeClaim is keyed <namespace>/<name>."""
    assert isinstance(event, VolumeClaimEvent)
    if not event.claim.namespace or not event.claim.name:
        raise InvalidEvent("claim", "namespace and name must not be empty")
    _keyed_by("claim", key, event.claim.key)


def check_storage_named(key: str | None, event: Event) -> None:
    """PersistentVolumes and StorageClasses are keyed by their name."""
    if isinstance(event, PersistentVolumeEvent):
        _keyed_by("volume.name", key, event.volume.name)
    else:
        assert isinstance(event, StorageClassEvent)
        _keyed_by("storage_class.name", key, event.storage_class.name)


def check_csi_node(key: str | None, event: Event) -> None:
    """A CSINode is keyed by its name, its node's."""
    assert isinstance(event, CsiNodeEvent)
    _keyed_by("node", key, event.node)


def check_budget(key: str | None, event: Event) -> None:
    """PodDisruptionBudgets, keyed by "<namespace>/<name>"."""
    assert isinstance(event, DisruptionBudgetEvent)
    _keyed_by("namespace/name", key, event.key)


EDGE_CHECKS: Mapping[str, EventCheck] = {
    topics.TOPOLOGY_NODES.name: check_topology,
    topics.USAGE_DEVICES.name: check_usage,
    topics.NODES_STATUS.name: check_node_status,
    topics.TOPOLOGY_NETWORK.name: check_named,
    topics.TOPOLOGY_LEVELS.name: check_named,
    topics.RESOURCE_SLICES.name: check_named,
    topics.NAMESPACES.name: check_named,
    topics.RESOURCE_CLASSES.name: check_named,
    topics.RESOURCE_TAINT_RULES.name: check_named,
    topics.PODS_LIFECYCLE.name: check_lifecycle,
    topics.STORAGE_CLAIMS.name: check_volume_claim,
    topics.STORAGE_VOLUMES.name: check_storage_named,
    topics.STORAGE_CLASSES.name: check_storage_named,
    topics.STORAGE_CSINODES.name: check_csi_node,
    topics.DISRUPTION_BUDGETS.name: check_budget,
}


def check_event(topic: str, key: str | None, event: Event | None) -> None:
    """Raises InvalidEvent when `event` (None: a tombstone, always fine) breaks its topic's rules."""
    if event is None:
        return
    check = EDGE_CHECKS.get(topic)
    if check is not None:
        check(key, event)
