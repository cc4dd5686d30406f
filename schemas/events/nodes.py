"""Events about nodes: topology.nodes, usage.devices, nodes.status."""

from __future__ import annotations

from typing import Annotated

import msgspec

from schemas.events.base import Event
from schemas.kube import Taint
from schemas.topology import Device, Link

# --- topology.nodes (compacted, key = node) -------------------------------------------------


class NodeTopologyEvent(Event, frozen=True, kw_only=True):
    """The devices of one node and the links between them (from NVML or a fixture)."""

    node: str
    machine_type: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...] = ()
    source: str = ""
    observed_at: float = 0.0  # unix seconds


# --- usage.devices (key = node) -------------------------------------------------------------


class DeviceUsage(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    memory_used_mib: int = 0
    utilization_pct: int = 0
    healthy: bool = True


class DeviceUsageEvent(Event, frozen=True, kw_only=True):
    """Measured usage of a node's devices; health here overrides the topology's."""

    node: str
    devices: tuple[DeviceUsage, ...]
    observed_at: float = 0.0


# --- nodes.status (compacted, key = node) ---------------------------------------------------


class NodeImage(msgspec.Struct, frozen=True, kw_only=True):
    """A container image the node holds (node.status.images[]): its names and size, for ImageLocality."""

    names: tuple[str, ...] = ()
    size_bytes: Annotated[int, msgspec.Meta(ge=0)] = 0


class NodeStatusEvent(Event, frozen=True, kw_only=True):
    """What the API server says of a node: labels, capacity, readiness, cordon, the images it holds."""

    node: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    allocatable: dict[str, str] = {}  # resource name -> Kubernetes quantity
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False  # cordoned
    images: tuple[NodeImage, ...] = ()  # status.images, names and sizes only (ImageLocality)
    deleted: bool = False
    resource_version: str = ""
    observed_at: float = 0.0
